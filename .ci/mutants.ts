/**
 * Mutation testing: one-line changes a real bug could make to security- and correctness-critical
 * lines, each run against the test files that should notice it. A mutant is "caught" when those
 * tests fail, "survived" when they pass (a gap in the tests, or an equivalent change listed with
 * its reason in test/README.md).
 *
 *   npx --yes deno@2.9.6 task mutants [--only name[,name…]] [--list] [--timeout seconds]
 *       [--tests file[,file…]] [--filter pattern]
 *
 * `--tests` and `--filter` replace the chosen mutants' own test files and filter: to see whether
 * one test alone catches a mutant (before and after writing it).
 *
 * The mutants are applied to a copy of the checkout (its files as they are now, node_modules
 * linked), never to the checkout itself; the copy is removed on exit, on Ctrl-C or SIGTERM. Each
 * mutant is applied by replacing an exact text that must occur exactly once in its file ("stale"
 * otherwise), its tests run with `deno test --no-check` (a mutant that does not type-check still
 * runs), niced, and the copy's file is restored before the next one. Not part of `deno task test`:
 * a full run takes long.
 */

import type { Mutant } from "./mutants/mutant.ts";
import { MUTANTS } from "./mutants/all.ts";

export { type Mutant, MUTANTS };

export type Outcome = "caught" | "survived" | "stale" | "timeout";

/** Applies `m` to `text`: the mutated text, or null when `m.from` is not there exactly once. */
export function mutate(text: string, m: Pick<Mutant, "from" | "to">): string | null {
  const at = text.indexOf(m.from);
  if (at < 0 || text.indexOf(m.from, at + 1) >= 0) return null;
  return text.slice(0, at) + m.to + text.slice(at + m.from.length);
}

/**
 * Runs `fn` with `file` holding `mutated`; the original text is written back when `fn` settles,
 * whatever it does.
 */
export async function withMutation<T>(
  file: string,
  mutated: string,
  fn: () => Promise<T>,
): Promise<T> {
  const original = await Deno.readTextFile(file);
  await Deno.writeTextFile(file, mutated);
  try {
    return await fn();
  } finally {
    await Deno.writeTextFile(file, original);
  }
}

/** Files of the checkout as they are now (tracked and untracked, not ignored). */
async function checkoutFiles(root: string): Promise<string[]> {
  const out = await new Deno.Command("git", {
    args: ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    cwd: root,
    stdout: "piped",
  }).output();
  if (!out.success) throw new Error("git ls-files failed");
  return new TextDecoder().decode(out.stdout).split("\0").filter(Boolean);
}

/** A copy of the checkout at `root` in a new temporary directory (node_modules linked). */
export async function copyCheckout(root: string): Promise<string> {
  const copy = await Deno.makeTempDir({ prefix: "gitedge-mutants-" });
  for (const file of await checkoutFiles(root)) {
    const stat = await Deno.lstat(`${root}/${file}`).catch(() => null);
    if (!stat?.isFile) continue; // deleted in the worktree, or a link
    const target = `${copy}/${file}`;
    await Deno.mkdir(target.slice(0, target.lastIndexOf("/")), { recursive: true });
    await Deno.copyFile(`${root}/${file}`, target);
  }
  await Deno.symlink(`${root}/node_modules`, `${copy}/node_modules`).catch(() => {});
  return copy;
}

/** `shared/tools/modern-git.sh` above `root`, which the copy (elsewhere) cannot find itself. */
async function modernGitScript(root: string): Promise<string | undefined> {
  for (let dir = root; dir !== "/" && dir !== ""; dir = dir.slice(0, dir.lastIndexOf("/")) || "/") {
    const candidate = `${dir}/shared/tools/modern-git.sh`;
    if (await Deno.stat(candidate).then(() => true, () => false)) return candidate;
  }
  return undefined;
}

/** Runs `m`'s tests in `copy` with the mutant applied. */
async function runMutant(
  copy: string,
  m: Mutant,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<{ outcome: Outcome; seconds: number; tail: string }> {
  const file = `${copy}/${m.file}`;
  const mutated = mutate(await Deno.readTextFile(file), m);
  if (mutated === null) {
    return { outcome: "stale", seconds: 0, tail: "original text not found once" };
  }
  const started = performance.now();
  return await withMutation(file, mutated, async () => {
    const args = ["-n", "10", Deno.execPath(), "test", "--allow-all", "--no-check"];
    if (m.filter) args.push("--filter", m.filter);
    const child = new Deno.Command("nice", {
      args: [...args, ...m.tests],
      cwd: copy,
      env: { ...env, NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        child.kill("SIGKILL");
      } catch { /* ended */ }
    }, timeoutMs);
    const out = await child.output().finally(() => clearTimeout(timer));
    const seconds = (performance.now() - started) / 1000;
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    const tail = text.split("\n").filter((l) => /FAILED|ok \||failed|error:/.test(l)).slice(-8)
      .join("\n");
    if (timedOut) return { outcome: "timeout", seconds, tail };
    if (/filtered out/.test(text) && /\b0 passed\b/.test(text) && out.success) {
      return { outcome: "stale", seconds, tail: `no test matched: ${tail}` };
    }
    return { outcome: out.success ? "survived" : "caught", seconds, tail };
  });
}

function parseArgs(argv: string[]) {
  const opts = {
    only: [] as string[],
    list: false,
    timeoutSeconds: 600,
    tests: undefined as string[] | undefined,
    filter: undefined as string | undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--only") opts.only.push(...argv[++i].split(","));
    else if (a.startsWith("--only=")) opts.only.push(...a.slice(7).split(","));
    else if (a === "--list") opts.list = true;
    else if (a === "--timeout") opts.timeoutSeconds = Number(argv[++i]);
    else if (a === "--tests") opts.tests = argv[++i].split(",");
    else if (a === "--filter") opts.filter = argv[++i];
    else throw new Error(`unknown argument ${a}`);
  }
  return opts;
}

async function main(): Promise<number> {
  const opts = parseArgs(Deno.args);
  const names = new Set(MUTANTS.map((m) => m.name));
  if (names.size !== MUTANTS.length) throw new Error("mutant names must be unique");
  const chosen = MUTANTS.filter((m) =>
    opts.only.length === 0 || opts.only.some((o) => m.name.includes(o))
  ).map((m) => ({
    ...m,
    tests: opts.tests ?? m.tests,
    filter: opts.tests || opts.filter ? opts.filter : m.filter,
  }));
  if (opts.list) {
    const root = new URL("..", import.meta.url).pathname;
    let stale = 0;
    for (const m of chosen) {
      const applies = mutate(await Deno.readTextFile(`${root}${m.file}`), m) !== null;
      if (!applies) stale++;
      console.log(`${applies ? "ok   " : "STALE"} ${m.name}\t${m.file}\t${m.tests.join(" ")}`);
    }
    return stale === 0 ? 0 : 1;
  }
  if (chosen.length === 0) {
    console.error("no mutant matches --only");
    return 2;
  }
  const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
  const copy = await copyCheckout(root);
  const cleanup = () => {
    try {
      Deno.removeSync(copy, { recursive: true });
    } catch { /* gone */ }
  };
  const onSignal = () => {
    cleanup();
    Deno.exit(130);
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  const env: Record<string, string> = {};
  const script = await modernGitScript(root);
  if (script && !Deno.env.get("GITEDGE_MODERN_GIT_SCRIPT")) env.GITEDGE_MODERN_GIT_SCRIPT = script;
  const counts: Record<Outcome, number> = { caught: 0, survived: 0, stale: 0, timeout: 0 };
  try {
    for (const m of chosen) {
      const r = await runMutant(copy, m, env, opts.timeoutSeconds * 1000);
      counts[r.outcome]++;
      console.log(`${r.outcome.padEnd(8)} ${m.name} (${r.seconds.toFixed(0)} s)`);
      if (r.outcome !== "caught") console.log(`         ${r.tail.replaceAll("\n", "\n         ")}`);
    }
  } finally {
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
    cleanup();
  }
  console.log(
    `mutants: ${chosen.length} run, ${counts.caught} caught, ${counts.survived} survived, ` +
      `${counts.timeout} timed out, ${counts.stale} stale`,
  );
  return counts.survived + counts.stale + counts.timeout === 0 ? 0 : 1;
}

if (import.meta.main) Deno.exit(await main());
