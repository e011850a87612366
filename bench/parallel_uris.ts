/**
 * Parallel packfile-URI downloads: `fetchPackfiles` with jobs 1, 2, 4, 8 against
 * `startFileServer` capped at 2 MB/s per connection (8×1 MiB), and jobs 1 vs 8 unthrottled
 * (8×16 MiB). The jobs values of a scenario run interleaved, round by round (the order rotates);
 * medians of `--runs` (3); every run indexes into a fresh bare repository. The scenarios are the
 * ones the seed patch (`fetch.packfileURIThreads`) used; the seed itself is not run here, so its
 * own figures are not comparable and are not printed.
 *
 * Usage: deno run --allow-all bench/parallel_uris.ts [--runs 3] [--quick]
 *
 * Hook for the stock-git comparison through the edge: call {@link runBench} with `comparisons`
 * (each one times a whole run of some other client, e.g. `git clone` via the edge) and they are
 * measured with the same runs/median and printed in the same table.
 */
import { fetchPackfiles } from "../mod.ts";
import { makePackFixtures, type PackFixture } from "../test/support/pack_fixtures.ts";
import { startFileServer } from "../test/support/relay.ts";
import { type BenchTable, flags, interleaved, median, printResult } from "./harness/mod.ts";

/** Another client to time next to fetchPackfiles (e.g. stock git through the edge). */
export interface Comparison {
  scenario: string;
  label: string;
  /** One timed run; resolves with elapsed seconds. */
  run(): Promise<number>;
}

/** One row of the result table. */
export interface BenchRow {
  scenario: string;
  label: string;
  jobs: number | null;
  seconds: number[];
  median: number;
  /** Median of the scenario's jobs-1 row divided by this row's median. */
  speedup: number | null;
}

interface Scenario {
  name: string;
  count: number;
  bytesEach: number;
  bytesPerSecond?: number;
  jobs: number[];
}

const MiB = 1024 * 1024;

const SCENARIOS: Scenario[] = [
  {
    name: "2 MB/s, 8×1 MiB",
    count: 8,
    bytesEach: MiB,
    bytesPerSecond: 2_000_000,
    jobs: [1, 2, 4, 8],
  },
  { name: "unthrottled, 8×16 MiB", count: 8, bytesEach: 16 * MiB, jobs: [1, 8] },
];

/** Runs every scenario (and `comparisons`) and returns the rows; prints nothing. */
export async function runBench(
  options: { runs?: number; quick?: boolean; comparisons?: Comparison[] } = {},
): Promise<BenchRow[]> {
  const runs = options.runs ?? 3;
  const root = await Deno.makeTempDir({ prefix: "gitedge-bench-uris-" });
  const rows: BenchRow[] = [];
  try {
    for (const scenario of SCENARIOS) {
      const sized = options.quick ? { ...scenario, bytesEach: scenario.bytesEach / 4 } : scenario;
      rows.push(...await runScenario(sized, `${root}/${rows.length}`, runs));
    }
    for (const c of options.comparisons ?? []) {
      const seconds = await repeat(runs, () => c.run());
      const base = rows.find((r) => r.scenario === c.scenario && r.jobs === 1);
      const mid = median(seconds);
      rows.push({
        scenario: c.scenario,
        label: c.label,
        jobs: null,
        seconds,
        median: mid,
        speedup: base ? base.median / mid : null,
      });
    }
  } finally {
    await Deno.remove(root, { recursive: true });
  }
  return rows;
}

async function runScenario(scenario: Scenario, dir: string, runs: number): Promise<BenchRow[]> {
  const packs = await makePackFixtures(`${dir}/packs`, {
    count: scenario.count,
    bytesEach: scenario.bytesEach,
    seed: 42,
  });
  await using server = await spawnFileServer({
    files: Object.fromEntries(packs.map((p) => [`/${p.hash}.pack`, p.path])),
    bytesPerSecond: scenario.bytesPerSecond,
  });
  const uris = packs.map((p: PackFixture) => ({
    hash: p.hash,
    uri: `${server.url}/${p.hash}.pack`,
  }));
  let n = 0;
  const results = await interleaved(
    runs,
    scenario.jobs.map((jobs) => async () => {
      const gitDir = `${dir}/repo-${jobs}-${n++}.git`;
      await initBare(gitDir);
      const started = performance.now();
      await fetchPackfiles(uris, { gitDir, jobs });
      const elapsed = (performance.now() - started) / 1000;
      await Deno.remove(gitDir, { recursive: true });
      return elapsed;
    }),
  );
  const medians = results.map((seconds) => median(seconds));
  const base = medians[scenario.jobs.indexOf(1)] ?? medians[0];
  return scenario.jobs.map((jobs, i) => ({
    scenario: scenario.name,
    label: "fetchPackfiles",
    jobs,
    seconds: results[i],
    median: medians[i],
    speedup: base / medians[i],
  }));
}

/** What the file-server child is started with. */
interface ServeConfig {
  files: Record<string, string>;
  bytesPerSecond?: number;
}

/**
 * Runs `startFileServer` in a child Deno process, so its throttling timers and streaming do not
 * share an event loop with the client under test (a real server would not either).
 */
async function spawnFileServer(config: ServeConfig): Promise<{ url: string } & AsyncDisposable> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--allow-all",
      new URL(import.meta.url).pathname,
      "--serve",
      JSON.stringify(config),
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  while (!buffered.includes("\n")) {
    const { done, value } = await lines.read();
    if (done) throw new Error("file server child exited before printing its URL");
    buffered += value;
  }
  const url = buffered.slice(0, buffered.indexOf("\n")).trim();
  return {
    url,
    async [Symbol.asyncDispose]() {
      await child.stdin.close();
      await lines.cancel();
      await child.status;
    },
  };
}

/** The child side of {@link spawnFileServer}: serve until stdin closes. */
async function serveUntilStdinCloses(config: ServeConfig): Promise<void> {
  await using server = await startFileServer(config);
  console.log(server.url);
  for await (const _ of Deno.stdin.readable) {
    // Nothing is sent on stdin; its end is the signal to stop.
  }
}

async function repeat(runs: number, once: () => Promise<number>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < runs; i++) out.push(await once());
  return out;
}

async function initBare(path: string): Promise<void> {
  const out = await new Deno.Command("git", {
    args: ["init", "-q", "--bare", path],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`git init failed: ${new TextDecoder().decode(out.stderr)}`);
}

/** The targets (jobs 8 vs jobs 1) and whether this run met them, one line each. */
export function formatTargets(rows: BenchRow[]): string[] {
  const targets: [string, number][] = [["2 MB/s", 7.5], ["unthrottled", 1.7]];
  return targets.map(([prefix, target]) => {
    const row = rows.find((r) => r.scenario.startsWith(prefix) && r.jobs === 8);
    if (!row?.speedup) return `target jobs 8 >= ${target}x jobs 1 (${prefix}): not measured`;
    const verdict = row.speedup >= target ? "met" : "MISSED";
    return `target jobs 8 >= ${target}x jobs 1 (${prefix}): ${row.speedup.toFixed(2)}x, ${verdict}`;
  });
}

/** Rows as the bench table: median, speedup against the scenario's jobs-1 row, every run. */
export function rowsTable(title: string, rows: BenchRow[], ratios: string[] = []): BenchTable {
  return {
    title,
    headers: ["scenario", "client", "jobs", "median s", "speedup", "runs (s)"],
    rows: rows.map((r) => [
      r.scenario,
      r.label,
      r.jobs,
      r.median.toFixed(3),
      r.speedup === null ? null : `${r.speedup.toFixed(2)}x`,
      r.seconds.map((s) => s.toFixed(2)).join(" "),
    ]),
    ratios,
  };
}

if (import.meta.main && Deno.args[0] === "--serve") {
  await serveUntilStdinCloses(JSON.parse(Deno.args[1]));
} else if (import.meta.main) {
  const runs = flags.number("runs", 3);
  const rows = await runBench({ runs, quick: flags.has("quick") });
  printResult(
    rowsTable(`fetchPackfiles, ${runs} interleaved runs, medians`, rows, formatTargets(rows)),
  );
}
