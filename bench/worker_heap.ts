/**
 * The Worker's own isolate heap during a snapshot build, read where the platform's 128 MB limit
 * applies: V8's heap of the isolate that runs gitedge (Worker and Durable Object share it), asked
 * through workerd's inspector (`Runtime.getHeapUsage`) every 100 ms while a warm builds git's
 * history to v2.0.0 (165k objects, 54 MB pack), not workerd's RSS, which also holds the local R2
 * and Durable Object simulators. Prints the peak used heap per inspector target.
 *
 *   deno run -A bench/worker_heap.ts [--chunks N]
 */
import { startWorkerEdge } from "../test/support/worker_harness.ts";
import { startOrigin } from "../test/support/origin.ts";
import { tempDir } from "../test/support/git.ts";
import { bareFromBundle, packStats } from "./harness/repos.ts";
import { flags, loadavg } from "./harness/mod.ts";

const CHUNKS = flags.number("chunks", 4);

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Samples `Runtime.getHeapUsage` of one inspector target until `stop`; returns the peak. */
function sampleHeap(
  wsUrl: string,
  stop: AbortSignal,
): Promise<{ peakUsed: number; samples: number }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl);
    let id = 0;
    let peakUsed = 0;
    let samples = 0;
    let timer: ReturnType<typeof setInterval> | undefined;
    ws.onopen = () => {
      timer = setInterval(
        () => ws.send(JSON.stringify({ id: ++id, method: "Runtime.getHeapUsage" })),
        100,
      );
    };
    ws.onmessage = (e) => {
      const msg = JSON.parse(String(e.data));
      if (msg.result?.usedSize !== undefined) {
        samples++;
        peakUsed = Math.max(peakUsed, msg.result.usedSize);
      }
    };
    ws.onerror = (e) => reject(new Error(`inspector: ${(e as ErrorEvent).message ?? e.type}`));
    stop.addEventListener("abort", () => {
      clearInterval(timer);
      ws.close();
      resolve({ peakUsed, samples });
    });
  });
}

await using work = await tempDir("gitedge-worker-heap-");
const root = `${work.path}/origin`;
await Deno.mkdir(root);
await bareFromBundle(`${root}/git.git`);
const { objects, packMB } = await packStats(`${root}/git.git`);
await using origin = await startOrigin({ root });
const port = freePort();
await using worker = await startWorkerEdge({
  config: { origin: origin.url, chunks: CHUNKS },
  inspectorPort: port,
});
const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json() as {
  title?: string;
  id: string;
  webSocketDebuggerUrl: string;
}[];
const stop = new AbortController();
const sampling = targets.map((t) =>
  sampleHeap(t.webSocketDebuggerUrl, stop.signal).then((r) => ({ target: t.title ?? t.id, ...r }))
);
const started = performance.now();
const warm = await fetch(`${worker.url}/_edge/warm/git.git`, { method: "POST" });
const body = await warm.json();
const seconds = (performance.now() - started) / 1000;
stop.abort();
const results = await Promise.all(sampling);
const report = {
  date: new Date().toISOString(),
  load: loadavg(),
  repo: { objects, packMB },
  chunks: CHUNKS,
  warm: {
    status: warm.status,
    state: body.snapshot?.state,
    seconds: Math.round(seconds * 10) / 10,
  },
  heap: results.map((r) => ({
    target: r.target,
    samples: r.samples,
    peakUsedMiB: Math.round(r.peakUsed / (1 << 20) * 10) / 10,
  })),
};
console.log(JSON.stringify(report, null, 2));
