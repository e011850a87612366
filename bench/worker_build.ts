/**
 * Snapshot build of a git.git-sized repository through the Worker (workerd via Miniflare, local
 * R2 and Durable Objects) next to the Deno server (`gitedge serve`, filesystem store), same origin
 * and repository. Each edge runs in its own process, sampled from outside (/proc) every 100 ms
 * while it builds: memory growth over idle (RSS), peak open descriptors, CPU seconds, wall time.
 * The Worker's build reports how many invocations it took and the most subrequests one of them
 * made (counted at the R2 binding and the origin fetch). Then stock git clones the repository by
 * URI from each edge, and each clone must equal a direct clone.
 *
 *   deno run -A bench/worker_build.ts [--repo big|git] [--chunks N] [--part-mib N] [--heap-mib N]
 *                                     [--no-deno]
 *
 * The control (always run, after the Worker): a trivial Worker without gitedge code
 * (bench/r2_control_worker.ts) in its own workerd, started the same way, writes the same bytes into
 * the same local R2 binding the way the build does (segments of one part each, the index columns,
 * each snapshot pack as a multipart upload reading the segments back, then deletes), one request
 * per build step, sampled the same way. workerd's growth minus the control's is what the build
 * itself costs. Miniflare 4 keeps local R2 on disk whatever `r2Persist` says (its "memory" mode is
 * a temporary directory): blobs as files, metadata in SQLite, served by an R2 simulator Worker in
 * the same workerd process.
 *
 * workerd runs with V8's heap capped at `--heap-mib` (default 128, the platform's isolate limit)
 * per isolate, so a build whose live memory did not fit would die instead of passing.
 *
 * `--repo big` (default): generated, 849k objects, 658 MB pack, delta chains (the first run
 * generates it into the fixture cache: minutes of CPU). `--repo git`: git's own history to
 * v2.0.0 (165k objects, 54 MB), from $GITEDGE_GIT_BUNDLE (default /work/shared/data/…).
 * Writes bench/out/worker_build.json.
 */
import { startWorker, startWorkerEdge } from "../test/support/worker_harness.ts";
import { makeBigRepo } from "../test/support/big_repo.ts";
import { assertSameClone } from "../test/support/fixtures.ts";
import { git, tempDir } from "../test/support/git.ts";
import { startOrigin } from "../test/support/origin.ts";
import {
  bareFromBundle,
  childPids,
  cpuTimes,
  flags,
  loadavg,
  openFds,
  packStats,
  printResult,
  ratio,
  rssMiB,
  startEdgeProcess,
} from "./harness/mod.ts";

const REPO = flags.string("repo", "big");
const CHUNKS = flags.number("chunks", 4);
const PART_MIB = flags.number("part-mib", 8);
const HEAP_MIB = flags.number("heap-mib", 128);
const DENO = !flags.has("no-deno");

/** One process's figures, read from /proc. */
interface Sample {
  rssMiB: number;
  fds: number;
  cpuSeconds: number;
}

function sample(pid: number): Sample {
  return { rssMiB: rssMiB(pid), fds: openFds(pid), cpuSeconds: cpuTimes(pid).own };
}

/** The workerd processes this process started. */
const childWorkerd = () => childPids("workerd");

interface BuildFigures {
  edge: string;
  idleRssMiB: number;
  peakRssMiB: number;
  growthMiB: number;
  peakFds: number;
  cpuSeconds: number;
  wallSeconds: number;
  invocations: number | null;
  maxSubrequests: number | null;
  packs: number;
  packBytes: number[];
}

/** Runs `work` while sampling process `pid` every 100 ms: its growth over idle, peak fds, CPU. */
async function measured<T>(pid: number, work: () => Promise<T>) {
  await new Promise((r) => setTimeout(r, 1000));
  const idle = sample(pid);
  let peakRss = idle.rssMiB;
  let peakFds = idle.fds;
  const timer = setInterval(() => {
    const s = sample(pid);
    peakRss = Math.max(peakRss, s.rssMiB);
    peakFds = Math.max(peakFds, s.fds);
  }, 100);
  const t0 = performance.now();
  try {
    const result = await work();
    const wallSeconds = (performance.now() - t0) / 1000;
    const end = sample(pid);
    return {
      result,
      idleRssMiB: idle.rssMiB,
      peakRssMiB: Math.max(peakRss, end.rssMiB),
      growthMiB: Math.max(peakRss, end.rssMiB) - idle.rssMiB,
      peakFds: Math.max(peakFds, end.fds),
      cpuSeconds: end.cpuSeconds - idle.cpuSeconds,
      wallSeconds,
    };
  } finally {
    clearInterval(timer);
  }
}

/** Warms `repo` through the edge at `url` (process `pid`), sampling the process meanwhile. */
async function measuredWarm(edge: string, url: string, pid: number): Promise<BuildFigures> {
  const m = await measured(pid, async () => {
    const res = await fetch(`${url}/_edge/warm/repo.git`, { method: "POST" });
    const text = await res.text();
    if (!res.ok) throw new Error(`warming through ${edge} failed (${res.status}): ${text}`);
    const { snapshot } = JSON.parse(text);
    if (snapshot.state !== "ready") throw new Error(`${edge}: ${text}`);
    return snapshot;
  });
  const snapshot = m.result;
  return {
    edge,
    idleRssMiB: m.idleRssMiB,
    peakRssMiB: m.peakRssMiB,
    growthMiB: m.growthMiB,
    peakFds: m.peakFds,
    cpuSeconds: m.cpuSeconds,
    wallSeconds: m.wallSeconds,
    invocations: snapshot.lastBuild?.invocations ?? null,
    maxSubrequests: snapshot.lastBuild?.maxSubrequests ?? null,
    packs: snapshot.packs.length,
    packBytes: snapshot.packs.map((p: { bytes: number }) => p.bytes),
  };
}

await using origin = await startOrigin();
await using work = await tempDir("gitedge-bench-");
if (REPO === "git") {
  await bareFromBundle(`${origin.root}/repo.git`);
} else {
  console.log("git.git-sized repository from the fixture cache (first run: generating)…");
  await makeBigRepo(origin, "repo.git");
}
const { objects, packMB } = await packStats(`${origin.root}/repo.git`);
console.log(`repository: ${objects} objects, ${packMB.toFixed(0)} MB of packs`);

const results: BuildFigures[] = [];
const clones: Record<string, number> = {};
const direct = `${work.path}/direct`;
await git(["clone", "-q", origin.repoUrl("repo.git"), direct]);

async function cloneByUri(edge: string, url: string): Promise<void> {
  const dest = `${work.path}/clone-${edge}`;
  const t0 = performance.now();
  const child = new Deno.Command("git", {
    args: ["-c", "fetch.uriProtocols=http", "clone", "-q", `${url}/repo.git`, dest],
    env: { GIT_TRACE: "1" },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const out = await child.output();
  const trace = new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`clone through ${edge} failed:\n${trace.slice(-2000)}`);
  clones[edge] = (performance.now() - t0) / 1000;
  const uris = trace.split("run_command: git http-fetch ").length - 1;
  if (uris === 0) throw new Error(`clone through ${edge} fetched no pack by URI`);
  await assertSameClone(direct, dest);
  console.log(`${edge}: stock git clone by URI (${uris} packs) equals a direct clone`);
  await Deno.remove(dest, { recursive: true });
}

if (DENO) {
  const deno = await startEdgeProcess(origin.url, `${work.path}/store`, [
    "--chunks",
    String(CHUNKS),
  ]);
  try {
    results.push(await measuredWarm("deno", deno.url, deno.pid));
    await cloneByUri("deno", deno.url);
  } finally {
    await deno.stop();
  }
}
{
  const before = new Set(childWorkerd());
  // Miniflare passes these V8 flags to workerd. `--max-heap-size` caps the JavaScript heap, not
  // ArrayBuffers' bytes (parts, chunks), which the platform's 128 MB counts too: a build that
  // completes here has shown its heap fits, not its whole memory (bench/worker_heap.ts reads that).
  Deno.env.set("MINIFLARE_WORKERD_V8_FLAGS", `--max-heap-size=${HEAP_MIB}`);
  await using worker = await startWorkerEdge({
    config: { origin: origin.url, chunks: CHUNKS },
    vars: { R2_PART_MIB: String(PART_MIB) },
    persistDir: `${work.path}/workerd`,
  });
  const pid = childWorkerd().find((p) => !before.has(p));
  if (pid === undefined) throw new Error("workerd process not found");
  results.push(await measuredWarm("workerd", worker.url, pid));
  await cloneByUri("workerd", worker.url);
}

/**
 * The control: a trivial Worker (bench/r2_control_worker.ts, no gitedge code) in its own workerd,
 * started the same way (same heap cap, same R2 persistence), moving the same bytes through the
 * same R2 binding the way the build does, step by step, sampled the same way.
 */
const packFiles: number[] = [];
for (const entry of Deno.readDirSync(`${origin.root}/repo.git/objects/pack`)) {
  if (entry.name.endsWith(".pack")) {
    packFiles.push(Deno.statSync(`${origin.root}/repo.git/objects/pack/${entry.name}`).size);
  }
}
const originPackBytes = packFiles.reduce((a, b) => a + b, 0);
const built = results.find((r) => r.edge === "workerd")!;
let control: Omit<BuildFigures, "invocations" | "maxSubrequests" | "packs" | "packBytes">;
{
  const before = new Set(childWorkerd());
  await using worker = await startWorker({
    entry: "bench/r2_control_worker.ts",
    r2Buckets: ["PACKS"],
    persistDir: `${work.path}/control`,
  });
  const pid = childWorkerd().find((p) => !before.has(p));
  if (pid === undefined) throw new Error("workerd process not found");
  const step = async (path: string) => {
    const res = await fetch(`${worker.url}${path}`, { method: "POST" });
    const text = await res.text();
    if (!res.ok) throw new Error(`control ${path} failed (${res.status}): ${text}`);
  };
  const m = await measured(pid, async () => {
    const part = PART_MIB * 1024 * 1024;
    await step(`/fetch?bytes=${originPackBytes}&part=${part}&objects=${objects}`);
    for (let k = 0; k < built.packBytes.length; k++) {
      await step(`/split?pack=${k}&sizes=${built.packBytes.join(",")}`);
    }
    await step("/publish");
  });
  control = { ...m, edge: "control" };
}

const w = results.find((r) => r.edge === "workerd")!;
const d = results.find((r) => r.edge === "deno");
printResult({
  title: `snapshot build: ${objects} objects, ${packMB.toFixed(0)} MB, ${CHUNKS} packs, ` +
    `${PART_MIB} MiB R2 parts/segments, workerd V8 heap cap ${HEAP_MIB} MiB; load ${loadavg()}`,
  headers: [
    "edge",
    "RSS growth MiB",
    "peak RSS MiB",
    "peak fds",
    "CPU s",
    "wall s",
    "invocations",
    "max subrequests",
  ],
  rows: [
    ...results.map((r) => [
      r.edge,
      r.growthMiB.toFixed(0),
      r.peakRssMiB.toFixed(0),
      r.peakFds,
      r.cpuSeconds.toFixed(1),
      r.wallSeconds.toFixed(1),
      r.invocations === null ? "1 (no limit)" : r.invocations,
      r.maxSubrequests,
    ]),
    [
      "control",
      control.growthMiB.toFixed(0),
      control.peakRssMiB.toFixed(0),
      control.peakFds,
      control.cpuSeconds.toFixed(1),
      control.wallSeconds.toFixed(1),
      built.packs + 2,
      null,
    ],
  ],
  ratios: [
    `control: a Worker without gitedge writing ${(originPackBytes / 1e6).toFixed(0)} MB of ` +
    `${PART_MIB} MiB segments, the index columns, ${built.packs} multipart packs of ` +
    `${(built.packBytes.reduce((a, b) => a + b, 0) / 1e6).toFixed(0)} MB, reading the segments ` +
    `back per pack, then deleting them`,
    `workerd RSS growth: gitedge build ${w.growthMiB.toFixed(0)} MiB, control ${
      control.growthMiB.toFixed(0)
    } MiB, difference (the build's own) ${(w.growthMiB - control.growthMiB).toFixed(0)} MiB; ` +
    `peak fds ${w.peakFds} vs ${control.peakFds}`,
    ...(d
      ? [
        `workerd / deno: wall ${ratio(w.wallSeconds, d.wallSeconds)}, CPU ${
          ratio(w.cpuSeconds, d.cpuSeconds)
        }; clone by URI ${clones.deno.toFixed(1)} s (deno) vs ${
          clones.workerd.toFixed(1)
        } s (workerd)`,
      ]
      : []),
  ],
});
await Deno.mkdir("bench/out", { recursive: true });
await Deno.writeTextFile(
  "bench/out/worker_build.json",
  JSON.stringify(
    {
      repo: REPO,
      objects,
      packMB,
      chunks: CHUNKS,
      heapMiB: HEAP_MIB,
      results,
      control,
      clones,
    },
    null,
    2,
  ) + "\n",
);
