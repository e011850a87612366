/**
 * Suites a machine cannot run (a git client or the current git missing) are skipped, never
 * silently: {@link skipped} prints a line at once and, under the test task (`.ci/test.ts`, which
 * sets {@link SKIP_LOG_ENV}), records it so the run ends with the list of what was skipped and why,
 * and fails when CI itself could not provide it (`CI=true`).
 */

/** The file (JSON lines) the test task collects skips in. */
export const SKIP_LOG_ENV = "GITEDGE_SKIP_LOG";

/** One skipped suite and why. */
export interface Skip {
  suite: string;
  reason: string;
}

/** Where {@link skipped} says it: the printed line, and the test task's log (if any). */
export interface SkipSinks {
  warn?: (line: string) => void;
  log?: string;
}

/** Says that `suite` does not run here and why: a line at once, and a record for the summary. */
export function skipped(suite: string, reason: string, sinks: SkipSinks = {}): void {
  const { warn = console.warn, log = Deno.env.get(SKIP_LOG_ENV) } = sinks;
  warn(`SKIPPED ${suite}: ${reason}`);
  if (log) {
    const line = JSON.stringify({ suite, reason } satisfies Skip) + "\n";
    Deno.writeTextFileSync(log, line, { append: true });
  }
}

/** The skips recorded in `log`, each once, in the order first seen. */
export function readSkips(log: string): Skip[] {
  const seen = new Map<string, Skip>();
  for (const line of Deno.readTextFileSync(log).split("\n")) {
    if (line.trim() === "") continue;
    const skip = JSON.parse(line) as Skip;
    seen.set(`${skip.suite}\n${skip.reason}`, skip);
  }
  return [...seen.values()];
}

/** The end-of-run report of `skips` ("" when nothing was skipped). */
export function formatSkips(skips: Skip[]): string {
  if (skips.length === 0) return "";
  const lines = skips.map((s) => `  - ${s.suite}: ${s.reason}`);
  return [`${skips.length} suite(s) skipped on this machine (the run is smaller):`, ...lines]
    .join("\n");
}
