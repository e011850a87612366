/**
 * The Worker's own isolate memory during a snapshot build, read where the platform's 128 MB limit
 * applies: the isolate that runs gitedge (Worker and Durable Object share it), not workerd's RSS,
 * which also holds the local R2 and Durable Object simulators. Two readings:
 *
 * - Samples: workerd's inspector (`Runtime.getHeapUsage`) every `--interval-ms` while a warm
 *   builds, per inspector target: V8's used heap and the bytes of ArrayBuffers outside it
 *   (`backingStorageSize`: typed arrays, the index columns and I/O buffers among them), the idle
 *   figures (before the warm) and the peaks. Garbage not yet collected counts, and a sample is
 *   answered only between the isolate's tasks: none come through while the fetch step streams
 *   the origin's pack (minutes at this size).
 * - `--gc-trace`: workerd runs with V8's `--trace-gc --trace-gc-verbose` (ArrayBuffers swept
 *   within each collection), which prints every collection, inside long steps too, with the heap
 *   before and after and the ArrayBuffer bytes after. Per build phase (the build's `build.step`
 *   log lines mark them): `liveMiB`, the largest heap after a full collection plus the
 *   ArrayBuffers still alive (what the build holds), and `heldMiB`, the largest heap a collection
 *   started from plus the ArrayBuffers (garbage included: how far V8 let it grow before
 *   collecting, which V8's heuristics decide).
 *
 *   deno run -A bench/worker_heap.ts [--repo git|big] [--chunks N] [--interval-ms N]
 *                                    [--heap-mib N] [--gc-trace]
 *
 * `--repo git` (default): git's history to v2.0.0 (165k objects, 54 MB pack), from
 * $GITEDGE_GIT_BUNDLE. `--repo big`: the generated git.git-sized repository of
 * bench/worker_build.ts (849k objects, 682 MB; the first run generates it into the fixture cache:
 * minutes of CPU). `--heap-mib N` caps V8's heap (`--max-heap-size`), so a build whose live JS
 * objects did not fit would fail (ArrayBuffers are outside that cap). Writes
 * bench/out/worker_heap-<repo>.json (and -series.json, the gitedge isolate's samples; -gc.log).
 */
import { startWorkerEdge } from "../test/support/worker_harness.ts";
import { startOrigin } from "../test/support/origin.ts";
import { makeBigRepo } from "../test/support/big_repo.ts";
import { tempDir } from "../test/support/git.ts";
import { bareFromBundle, packStats } from "./harness/repos.ts";
import { flags, loadavg } from "./harness/mod.ts";

const REPO = flags.string("repo", "git");
const CHUNKS = flags.number("chunks", 4);
const INTERVAL_MS = flags.number("interval-ms", 50);
const HEAP_MIB = flags.has("heap-mib") ? flags.number("heap-mib", 128) : undefined;
const GC_TRACE = flags.has("gc-trace");
if (REPO !== "git" && REPO !== "big") throw new Error(`--repo git|big, not ${REPO}`);

const MIB = 1 << 20;
const mib = (bytes: number) => Math.round(bytes / MIB * 10) / 10;

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** One answer of `Runtime.getHeapUsage`. */
interface HeapSample {
  used: number;
  /** ArrayBuffer backing stores and external strings (0 when the runtime does not say). */
  backing: number;
}

/** Peaks of one inspector target's samples. */
interface Peaks {
  samples: number;
  idle: HeapSample | null;
  peakUsed: number;
  peakBacking: number;
  /** The largest used + backing of one sample. */
  peakSum: number;
  /** Whether the runtime reported `backingStorageSize` at all. */
  backingReported: boolean;
  /** Every sample: ms since the start, used, backing. */
  series: [number, number, number][];
}

/** A sampler of one inspector target: `idle()` takes one sample now; `stop()` ends sampling. */
function heapSampler(wsUrl: string) {
  const ws = new WebSocket(wsUrl);
  const opened = new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = (e) => reject(new Error(`inspector: ${(e as ErrorEvent).message ?? e.type}`));
  });
  let id = 0;
  const waiting = new Map<number, (s: HeapSample) => void>();
  const peaks: Peaks = {
    samples: 0,
    idle: null,
    peakUsed: 0,
    peakBacking: 0,
    peakSum: 0,
    backingReported: false,
    series: [],
  };
  let t0 = 0;
  let recording = false;
  ws.onmessage = (e) => {
    const msg = JSON.parse(String(e.data));
    const r = msg.result;
    if (r?.usedSize === undefined) return;
    if (r.backingStorageSize !== undefined) peaks.backingReported = true;
    const sample = { used: r.usedSize, backing: r.backingStorageSize ?? 0 };
    waiting.get(msg.id)?.(sample);
    waiting.delete(msg.id);
    if (!recording) return;
    peaks.samples++;
    peaks.series.push([Math.round(performance.now() - t0), sample.used, sample.backing]);
    peaks.peakUsed = Math.max(peaks.peakUsed, sample.used);
    peaks.peakBacking = Math.max(peaks.peakBacking, sample.backing);
    peaks.peakSum = Math.max(peaks.peakSum, sample.used + sample.backing);
  };
  const ask = () => {
    const n = ++id;
    ws.send(JSON.stringify({ id: n, method: "Runtime.getHeapUsage" }));
    return new Promise<HeapSample>((resolve) => waiting.set(n, resolve));
  };
  let timer: ReturnType<typeof setInterval> | undefined;
  return {
    async idle(): Promise<void> {
      await opened;
      peaks.idle = await ask();
    },
    start(): void {
      recording = true;
      t0 = performance.now();
      timer = setInterval(ask, INTERVAL_MS);
    },
    stop(): Peaks {
      clearInterval(timer);
      recording = false;
      ws.close();
      return peaks;
    },
  };
}

/** What the GC trace says of one isolate in one phase of the build. */
interface PhaseMemory {
  collections: number;
  /** Largest V8 heap a collection started from plus the ArrayBuffers then (garbage included). */
  heldMiB: number;
  /** Largest V8 heap after a full collection plus the ArrayBuffers still alive: live memory. */
  liveMiB: number;
  /** Largest JS heap after a full collection. */
  liveHeapMiB: number;
}

/**
 * Reads workerd's output under `--trace-gc --trace-gc-verbose`: each collection's heap sizes
 * (`Scavenge 12.1 (14.0) -> 3.2 (15.0) MB`, V8's MB = MiB) and the ArrayBuffer bytes after it
 * (`Backing store memory: N KB`), per isolate (the address in each line), and the build's
 * `build.step` log lines, which mark the phases (memory after `begin` is the fetch step's, …).
 */
function gcTrace() {
  const raw: string[] = [];
  const collection =
    /^\[\d+:(0x[0-9a-f]+)\]\s+\d+ ms: (Scavenge|Mark-Compact|Minor Mark-Sweep|Mark-Sweep)\S*\s+([\d.]+) \([\d.]+\) -> ([\d.]+) \(/;
  const backing = /^\[\d+:(0x[0-9a-f]+)\] Backing store memory:\s+(\d+) KB/;
  let rest = "";
  const decoder = new TextDecoder();
  return {
    push(chunk: Uint8Array): void {
      const lines = (rest + decoder.decode(chunk, { stream: true })).split("\n");
      rest = lines.pop() ?? "";
      raw.push(...lines);
    },
    raw: () => raw,
    /**
     * Per phase, the isolate with the most collections (gitedge's, whose build allocates the
     * most; the R2 simulator's is next).
     */
    phases(): { isolate: string; phases: Record<string, PhaseMemory> } {
      const counts = new Map<string, number>();
      for (const l of raw) {
        const m = collection.exec(l);
        if (m) counts.set(m[1], (counts.get(m[1]) ?? 0) + 1);
      }
      const isolate = [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? "";
      const phases: Record<string, PhaseMemory> = {};
      let phase = "before the build";
      let last: { full: boolean; before: number; after: number } | null = null;
      for (const l of raw) {
        if (l.startsWith("{")) {
          try {
            const log = JSON.parse(l);
            if (log.event === "build.step") phase = `after ${log.step}`;
          } catch { /* not a log line */ }
          continue;
        }
        const c = collection.exec(l);
        if (c && c[1] === isolate) {
          last = { full: c[2] === "Mark-Compact", before: Number(c[3]), after: Number(c[4]) };
          continue;
        }
        const b = backing.exec(l);
        if (b && b[1] === isolate && last) {
          const buffers = Number(b[2]) / 1024;
          const p = phases[phase] ??= { collections: 0, heldMiB: 0, liveMiB: 0, liveHeapMiB: 0 };
          p.collections++;
          p.heldMiB = Math.max(p.heldMiB, round(last.before + buffers));
          if (last.full) {
            p.liveMiB = Math.max(p.liveMiB, round(last.after + buffers));
            p.liveHeapMiB = Math.max(p.liveHeapMiB, last.after);
          }
          last = null;
        }
      }
      return { isolate, phases };
    },
  };
}

const round = (x: number) => Math.round(x * 10) / 10;

await using work = await tempDir("gitedge-worker-heap-");
await using origin = await startOrigin({ root: `${work.path}/origin` });
if (REPO === "git") {
  await bareFromBundle(`${origin.root}/repo.git`);
} else {
  console.error("git.git-sized repository from the fixture cache (first run: generating)…");
  await makeBigRepo(origin, "repo.git");
}
const { objects, packMB } = await packStats(`${origin.root}/repo.git`);
console.error(`repository: ${objects} objects, ${packMB.toFixed(0)} MB of packs`);

const v8Flags = [
  ...(HEAP_MIB === undefined ? [] : [`--max-heap-size=${HEAP_MIB}`]),
  // Dead ArrayBuffers freed within the collection, so the bytes printed after it are live ones.
  ...(GC_TRACE
    ? ["--trace-gc", "--trace-gc-verbose", "--no-concurrent-array-buffer-sweeping"]
    : []),
];
if (v8Flags.length > 0) Deno.env.set("MINIFLARE_WORKERD_V8_FLAGS", v8Flags.join(" "));
const trace = gcTrace();
const port = freePort();
await using worker = await startWorkerEdge({
  config: { origin: origin.url, chunks: CHUNKS },
  inspectorPort: port,
  ...(GC_TRACE ? { onRuntimeOutput: (chunk: Uint8Array) => trace.push(chunk) } : {}),
});
const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json() as {
  title?: string;
  id: string;
  webSocketDebuggerUrl: string;
}[];
const samplers = targets.map((t) => ({
  target: t.title ?? t.id,
  sampler: heapSampler(t.webSocketDebuggerUrl),
}));
await Promise.all(samplers.map((s) => s.sampler.idle()));
samplers.forEach((s) => s.sampler.start());
const started = performance.now();
const warm = await fetch(`${worker.url}/_edge/warm/repo.git`, { method: "POST" });
const body = await warm.json();
const seconds = (performance.now() - started) / 1000;
const results = samplers.map((s) => ({ target: s.target, ...s.sampler.stop() }));
const report = {
  date: new Date().toISOString(),
  load: loadavg(),
  repo: { name: REPO, objects, packMB: Math.round(packMB) },
  chunks: CHUNKS,
  intervalMs: INTERVAL_MS,
  v8Flags,
  warm: {
    status: warm.status,
    state: body.snapshot?.state,
    seconds: Math.round(seconds * 10) / 10,
  },
  heap: results.map((r) => ({
    target: r.target,
    samples: r.samples,
    idleUsedMiB: r.idle ? mib(r.idle.used) : null,
    idleBackingMiB: r.idle ? mib(r.idle.backing) : null,
    peakUsedMiB: mib(r.peakUsed),
    peakBackingMiB: r.backingReported ? mib(r.peakBacking) : null,
    peakUsedPlusBackingMiB: mib(r.peakSum),
  })),
  ...(GC_TRACE ? { gc: trace.phases() } : {}),
};
console.log(JSON.stringify(report, null, 2));
await Deno.mkdir("bench/out", { recursive: true });
await Deno.writeTextFile(
  `bench/out/worker_heap-${REPO}.json`,
  JSON.stringify(report, null, 2) + "\n",
);
// The gitedge isolate's samples over time (ms, used bytes, ArrayBuffer bytes), for plotting.
const gitedge = results.find((r) => r.target.includes("core:user"));
if (gitedge) {
  await Deno.writeTextFile(
    `bench/out/worker_heap-${REPO}-series.json`,
    JSON.stringify(gitedge.series) + "\n",
  );
}
if (GC_TRACE) {
  await Deno.writeTextFile(`bench/out/worker_heap-${REPO}-gc.log`, trace.raw().join("\n"));
}
