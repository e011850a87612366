/**
 * The seed patch's scenarios (`fetch.packfileURIThreads`) through the real edge, whole clones end
 * to end:
 *
 *   - "2 MB/s, 8×1 MiB": a repository of 8 MiB of random blobs, warmed into 8 snapshot packs;
 *     clients clone through a relay capped at 2 MB/s per connection, which is also the edge's
 *     public URL (so every pack URI download is capped). Competitors: stock
 *     `git -c fetch.uriProtocols=http clone`, `gitedge clone --jobs 1|2|4|8`, and
 *     `gitedge clone --spool never --jobs 8` (every pack streamed into index-pack, as before the
 *     spool: "auto" must choose streaming on this link and cost nothing).
 *   - "unthrottled, 8×16 MiB": 128 MiB in 8 packs, straight from the edge; stock git, jobs 1, 8,
 *     and `--spool never` at jobs 1 and 8 (where "auto" must choose the spool and win).
 *
 * With `--seed-git PATH` (a git built with the seed patch: `bench/seed_git.sh` builds one and
 * prints its path), that git is a competitor too, in both scenarios, side by side in the same
 * rounds: `git -c fetch.uriProtocols=http -c fetch.packfileURIThreads=1|8 clone`, checked like
 * stock git (its GIT_TRACE must show one `http-fetch` per snapshot pack).
 *
 * The transfer floor is measured in the same rounds: `curl` downloads the same pack URIs, all at
 * once, one process each ("8 × curl"): the time no client can beat on this link and rig (each
 * pack's bytes at the cap, plus what the edge and relay take to answer 8 requests at once). The
 * lines after the tables split each clone's time beyond it into its steps.
 *
 * Every competitor runs as its own process (git, or the gitedge CLI under `deno run`, so CLI
 * start-up counts) and makes a full clone with checkout. Runs are interleaved round by round;
 * the table shows medians of `--runs` (3). The origin, edge and relay share this process. Each
 * clone starts after `sync` (none pays for the write-back of the one before).
 *
 * Usage: deno run --allow-all bench/edge_uris.ts [--runs 3] [--quick] [--seed-git PATH]
 */
import { type BenchRow, rowsTable } from "./parallel_uris.ts";
import { flags, median, printResult, settleDisk, warmEdge } from "./harness/mod.ts";
import { cloneJson } from "../test/support/cli_process.ts";
import { makeRepo } from "../test/support/fixtures.ts";
import { denoEdgeFactory } from "../test/support/edge.ts";
import { startOrigin } from "../test/support/origin.ts";
import { startRelay } from "../test/support/relay.ts";
import { tracedGit, URI_CLONE, urisFetched } from "../test/support/traced_git.ts";
import { SmartHttpClient } from "../src/client/smart_http.ts";
import { UploadPackSession } from "../src/client/upload_pack.ts";
import { CredentialManager } from "../src/client/credentials.ts";
import { wantedObjects } from "../src/client/checkout.ts";

const MiB = 1024 * 1024;

interface EdgeScenario {
  name: string;
  /** Random blob bytes in the repository (1 MiB blobs). */
  binaryBytes: number;
  /** Snapshot packs the edge splits it into. */
  chunks: number;
  /** Per-connection cap of the relay in front of the edge; no relay when absent. */
  bytesPerSecond?: number;
  jobs: number[];
  /** Jobs counts also run with `--spool never` (streaming into index-pack). */
  streamJobs: number[];
}

const SCENARIOS: EdgeScenario[] = [
  {
    name: "edge 2 MB/s, 8×1 MiB",
    binaryBytes: 8 * MiB,
    chunks: 8,
    bytesPerSecond: 2_000_000,
    jobs: [1, 2, 4, 8],
    streamJobs: [8],
  },
  {
    name: "edge no cap, 8×16 MiB",
    binaryBytes: 128 * MiB,
    chunks: 8,
    jobs: [1, 8],
    streamJobs: [1, 8],
  },
];

/** One client: clones `url` into `dir`, checks it fetched `packs` URIs, returns wall seconds. */
interface Competitor {
  label: string;
  jobs: number | null;
  clone(url: string, dir: string, packs: number): Promise<Timing>;
}

/** Seconds of one clone: wall time of the process, and the time the client reported itself. */
interface Timing {
  wall: number;
  /** The CLI's own `seconds` (without process start-up); absent for stock git. */
  reported?: number;
  /** The CLI's step end times (`--json` `phases`); absent for stock git. */
  phases?: Record<string, number>;
  /** Seconds from the CLI's runtime start to its clone's start (`--json` `startedAt`). */
  startedAt?: number;
}

/** The benchmark found a client not doing what it is measured for. */
export class BenchInvariantError extends Error {
  override name = "BenchInvariantError";
}

const STOCK = "stock git";
const OURS = "gitedge clone";
const SEED = "seed git";
const STREAMED = "gitedge --spool never";
const FLOOR = "8 × curl (floor)";

/** The pack URIs a fetch of every ref of `url` announces (its inline pack is read and dropped). */
async function announcedUris(url: string): Promise<string[]> {
  const credentials = new CredentialManager(url, undefined, {
    fill: () => Promise.resolve(null),
    approve: () => Promise.resolve(),
    reject: () => Promise.resolve(),
  });
  const http = new SmartHttpClient({ credentials });
  const { session, refs } = await UploadPackSession.connectListingRefs(http, [
    "refs/heads/",
    "refs/tags/",
  ]);
  const response = await session.fetch(wantedObjects(await refs), {
    packfileUris: true,
    progress: false,
  });
  await response.pack.pipeTo(new WritableStream());
  return response.uris.map((u) => u.uri);
}

/** The transfer floor: every URI downloaded at once by its own `curl`, bytes checked. */
function curlFloor(uris: string[], sizes: number[]): Competitor {
  return {
    label: FLOOR,
    jobs: uris.length,
    async clone() {
      const started = performance.now();
      const got = await Promise.all(uris.map(async (uri) => {
        const out = await new Deno.Command("curl", {
          args: ["-sS", "-o", "/dev/null", "-w", "%{size_download}", uri],
          stdout: "piped",
        }).output();
        if (!out.success) throw new BenchInvariantError(`curl failed on ${uri}`);
        return Number(new TextDecoder().decode(out.stdout));
      }));
      const total = sizes.reduce((a, b) => a + b, 0);
      if (got.reduce((a, b) => a + b, 0) !== total) {
        throw new BenchInvariantError(`curl got ${got.join(" + ")} bytes of ${total}`);
      }
      return { wall: (performance.now() - started) / 1000 };
    },
  };
}

function stockGit(): Competitor {
  return {
    label: STOCK,
    jobs: null,
    async clone(url, dir, packs) {
      const started = performance.now();
      const trace = await tracedGit([...URI_CLONE, url, dir]);
      const elapsed = (performance.now() - started) / 1000;
      const fetched = urisFetched(trace).length;
      if (fetched !== packs) {
        throw new BenchInvariantError(`stock git fetched ${fetched} URIs, expected ${packs}`);
      }
      return { wall: elapsed };
    },
  };
}

/** git built with the seed patch at `bin`, downloading the URI packs in `threads` threads. */
function seedGit(bin: string, threads: number): Competitor {
  return {
    label: SEED,
    jobs: threads,
    async clone(url, dir, packs) {
      const config = ["-c", `fetch.packfileURIThreads=${threads}`];
      const started = performance.now();
      const trace = await tracedGit([...config, ...URI_CLONE, url, dir], { bin });
      const elapsed = (performance.now() - started) / 1000;
      const fetched = urisFetched(trace).length;
      if (fetched !== packs) {
        throw new BenchInvariantError(`seed git fetched ${fetched} URIs, expected ${packs}`);
      }
      return { wall: elapsed };
    },
  };
}

function gitedge(jobs: number, streamed = false): Competitor {
  const spool = streamed ? ["--spool", "never"] : [];
  return {
    label: streamed ? STREAMED : OURS,
    jobs,
    async clone(url, dir, packs) {
      const started = performance.now();
      const summary = await cloneJson(["--jobs", String(jobs), ...spool, url, dir], Deno.cwd());
      const elapsed = (performance.now() - started) / 1000;
      if (summary.packs.length !== packs) {
        throw new BenchInvariantError(
          `gitedge fetched ${summary.packs.length} URIs, expected ${packs}`,
        );
      }
      return {
        wall: elapsed,
        reported: summary.seconds,
        phases: summary.phases,
        startedAt: summary.startedAt,
      };
    },
  };
}

/** What one scenario measured. */
export interface ScenarioResult {
  /** Wall time of each client process. */
  rows: BenchRow[];
  /** The gitedge CLI's self-reported seconds (no process start-up), same jobs-1 base. */
  reportedRows: BenchRow[];
  /** Sizes of the snapshot packs the edge handed out. */
  packSizes: number[];
  /** The relay's cap, if any. */
  bytesPerSecond?: number;
  /**
   * Per gitedge jobs count: median end time of each clone step, plus `process` (the process's wall
   * time outside the clone) and `startup` (of that, the runtime's start to the clone's).
   */
  phases: Record<number, Record<string, number>>;
}

/** Runs every scenario (each with its own origin, edge and relay). */
export async function runEdgeBench(
  options: { runs?: number; quick?: boolean; seedGit?: string } = {},
): Promise<ScenarioResult[]> {
  const runs = options.runs ?? 3;
  const results: ScenarioResult[] = [];
  for (const scenario of SCENARIOS) {
    const sized = options.quick ? { ...scenario, binaryBytes: scenario.binaryBytes / 4 } : scenario;
    results.push(await runScenario(sized, runs, options.seedGit));
  }
  return results;
}

/** The seed's thread counts run next to ours (its own benchmark's 1 and 8). */
const SEED_THREADS = [1, 8];

async function runScenario(
  scenario: EdgeScenario,
  runs: number,
  seedBin?: string,
): Promise<ScenarioResult> {
  const root = await Deno.makeTempDir({ prefix: "gitedge-bench-edge-" });
  try {
    await using origin = await startOrigin();
    await makeRepo(origin, "bench.git", {
      binaryBytes: scenario.binaryBytes,
      commits: 8,
      branches: 0,
      tags: 0,
      deltaFileRevisions: 4,
    });
    let edgeUrl = "";
    await using relay = scenario.bytesPerSecond === undefined
      ? null
      : await startRelay(() => edgeUrl, { bytesPerSecond: scenario.bytesPerSecond });
    await using edge = await denoEdgeFactory({
      origin: origin.url,
      chunks: scenario.chunks,
      publicUrl: relay?.url,
    });
    edgeUrl = edge.url;
    const snapshot = await warmEdge(edge.url, "bench.git");
    const packSizes = (snapshot.packs as { bytes: number }[]).map((p) => p.bytes);
    const url = `${relay?.url ?? edge.url}/bench.git`;

    const uris = await announcedUris(url);
    const competitors = [
      curlFloor(uris, packSizes),
      stockGit(),
      ...scenario.jobs.map((jobs) => gitedge(jobs)),
      ...scenario.streamJobs.map((jobs) => gitedge(jobs, true)),
      ...(seedBin === undefined ? [] : SEED_THREADS.map((t) => seedGit(seedBin, t))),
    ];
    const timings = competitors.map((): Timing[] => []);
    let n = 0;
    for (let round = 0; round < runs; round++) {
      for (const [i, c] of competitors.entries()) {
        const dir = `${root}/clone-${n++}`;
        await settleDisk();
        timings[i].push(await c.clone(url, dir, packSizes.length));
        await Deno.remove(dir, { recursive: true }).catch(() => {}); // the floor makes none
      }
    }
    const wall = competitors.map((c, i) => ({ c, seconds: timings[i].map((t) => t.wall) }));
    const reported = competitors.flatMap((c, i) =>
      c.label !== OURS ? [] : [{ c, seconds: timings[i].map((t) => t.reported ?? NaN) }]
    );
    const phases: Record<number, Record<string, number>> = {};
    competitors.forEach((c, i) => {
      if (c.label !== OURS || c.jobs === null) return;
      const names = Object.keys(timings[i][0].phases ?? {});
      const table: Record<string, number> = {};
      for (const name of names) table[name] = median(timings[i].map((t) => t.phases![name]));
      table.process = median(timings[i].map((t) => t.wall - (t.reported ?? t.wall)));
      table.startup = median(timings[i].map((t) => t.startedAt ?? NaN));
      phases[c.jobs] = table;
    });
    return {
      rows: toRows(scenario.name, wall),
      reportedRows: toRows(scenario.name, reported),
      packSizes,
      bytesPerSecond: scenario.bytesPerSecond,
      phases,
    };
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

/** Table rows with medians and speedups against gitedge's jobs-1 row. */
function toRows(scenario: string, measured: { c: Competitor; seconds: number[] }[]): BenchRow[] {
  const medians = measured.map((m) => median(m.seconds));
  const base = medians[measured.findIndex((m) => m.c.label === OURS && m.c.jobs === 1)];
  return measured.map((m, i) => ({
    scenario,
    label: m.c.label,
    jobs: m.c.jobs,
    seconds: m.seconds,
    median: medians[i],
    speedup: base / medians[i],
  }));
}

/**
 * The pure transfer time at the relay's cap with `jobs` connections, packs handed out in order
 * (a lower bound for any client).
 */
export function transferFloor(packSizes: number[], bytesPerSecond: number, jobs: number): number {
  const lanes = new Array(Math.min(jobs, packSizes.length)).fill(0);
  for (const size of packSizes) {
    const lane = lanes.indexOf(Math.min(...lanes));
    lanes[lane] += size / bytesPerSecond;
  }
  return Math.max(...lanes);
}

/**
 * Lines with the ratios the seed reports: jobs 8 vs jobs 1, and jobs 8 vs stock git; the same for
 * the seed's git (8 threads vs 1, vs stock git) when it ran, and our jobs 8 against its 8 threads.
 */
export function formatRatios(rows: BenchRow[]): string[] {
  const lines: string[] = [];
  for (const scenario of new Set(rows.map((r) => r.scenario))) {
    const of = (label: string, jobs: number | null) =>
      rows.find((r) => r.scenario === scenario && r.label === label && r.jobs === jobs)?.median;
    const j1 = of(OURS, 1);
    const j8 = of(OURS, 8);
    const stock = of(STOCK, null);
    if (j1 === undefined || j8 === undefined || stock === undefined) continue;
    lines.push(
      `${scenario}: jobs 8 vs jobs 1 ${(j1 / j8).toFixed(2)}x; ` +
        `jobs 8 vs stock git ${(stock / j8).toFixed(2)}x`,
    );
    const floor = rows.find((r) => r.scenario === scenario && r.label === FLOOR)?.median;
    if (floor !== undefined) {
      lines.push(
        `${scenario}: 8 × curl floor ${floor.toFixed(3)} s; jobs 8 takes ${
          (j8 - floor).toFixed(3)
        } s more; a client as fast as the floor would be ${(j1 / floor).toFixed(2)}x jobs 1 ` +
          `and ${(stock / floor).toFixed(2)}x stock git`,
      );
    }
    const streamed8 = of(STREAMED, 8);
    if (streamed8 !== undefined) {
      const streamed1 = of(STREAMED, 1);
      lines.push(
        `${scenario}: jobs 8 (--spool auto) vs jobs 8 --spool never ${
          (streamed8 / j8).toFixed(2)
        }x` + (streamed1 === undefined
          ? ""
          : `; --spool never jobs 8 vs its jobs 1 ${(streamed1 / streamed8).toFixed(2)}x`),
      );
    }
    const s1 = of(SEED, 1);
    const s8 = of(SEED, 8);
    if (s1 === undefined || s8 === undefined) continue;
    lines.push(
      `${scenario}: seed git 8 threads vs its 1 thread ${(s1 / s8).toFixed(2)}x; ` +
        `vs stock git ${(stock / s8).toFixed(2)}x; ` +
        `gitedge jobs 8 vs seed git 8 threads ${(s8 / j8).toFixed(2)}x`,
    );
  }
  return lines;
}

if (import.meta.main) {
  const runs = flags.number("runs", 3);
  const seedGit = flags.value("seed-git");
  if (seedGit !== undefined) {
    const version = await new Deno.Command(seedGit, { args: ["--version"] }).output();
    if (!version.success) throw new Error(`--seed-git ${seedGit}: \`--version\` failed`);
    console.log(`seed git: ${seedGit}, ${new TextDecoder().decode(version.stdout).trim()}`);
  }
  const before = Deno.loadavg();
  const results = await runEdgeBench({ runs, quick: flags.has("quick"), seedGit });
  const after = Deno.loadavg();
  for (const r of results) {
    const name = r.rows[0].scenario;
    console.log(`${name}: snapshot packs (bytes) ${r.packSizes.join(" ")}`);
    if (r.bytesPerSecond !== undefined) {
      const floors = [1, 2, 4, 8].map((j) =>
        `jobs ${j} ${transferFloor(r.packSizes, r.bytesPerSecond!, j).toFixed(2)} s`
      );
      console.log(`${name}: transfer floor at the cap: ${floors.join(", ")}`);
    }
  }
  const rows = results.flatMap((r) => r.rows);
  printResult(rowsTable(
    `whole clones through the edge, wall time of the client process (gitedge includes ` +
      `\`deno run\` start-up), ${runs} runs, medians`,
    rows,
    formatRatios(rows),
  ));
  printResult(rowsTable(
    "gitedge clone --json self-reported seconds (in-process, no start-up)",
    results.flatMap((r) => r.reportedRows),
  ));
  console.log("\ngitedge clone steps: median end time of each, s since the clone started");
  for (const r of results) {
    for (const [jobs, table] of Object.entries(r.phases)) {
      const steps = Object.entries(table).filter(([k]) => k !== "process" && k !== "startup")
        .sort((a, b) => a[1] - b[1]).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(", ");
      console.log(
        `${r.rows[0].scenario}, jobs ${jobs}: ${steps}; process start-up and exit ${
          table.process.toFixed(3)
        } (runtime start to clone start ${table.startup.toFixed(3)})`,
      );
    }
  }
  console.log(
    `\nload average before ${before.map((l) => l.toFixed(2)).join(" ")}, ` +
      `after ${after.map((l) => l.toFixed(2)).join(" ")}`,
  );
}
