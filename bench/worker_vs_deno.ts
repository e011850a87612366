/**
 * Warm clone through the Worker (workerd via Miniflare, local R2 and Durable Objects) versus
 * through the Deno server (filesystem store), same origin and repository, side by side.
 *
 *   deno run --allow-all bench/worker_vs_deno.ts [--mib N] [--runs N]
 *
 * Prints the snapshot build time, per-run clone times, medians and the Worker/Deno ratio, and
 * writes bench/out/worker_vs_deno.json.
 * Both edges are warmed first; every measured clone uses `fetch.uriProtocols=http`, so it is the
 * packfile-URI path: a small rewritten fetch through the edge plus the packs from the store.
 */
import { startDenoEdge } from "../edge/deno/server.ts";
import { startWorkerEdge } from "../test/support/worker_harness.ts";
import { makeRepo } from "../test/support/fixtures.ts";
import { git, tempDir } from "../test/support/git.ts";
import { startOrigin } from "../test/support/origin.ts";
import { flags, loadavg, median, printResult, ratio, timed, warmEdge } from "./harness/mod.ts";

interface Edge {
  name: string;
  url: string;
}

/** Builds the snapshot through `edge`; returns how long the build took (ms). */
async function warm(edge: Edge, repo: string): Promise<number> {
  return await timed(() => warmEdge(edge.url, repo)) * 1000;
}

async function timedClone(edge: Edge, repo: string, dest: string): Promise<number> {
  const start = performance.now();
  await git([
    "-c",
    "fetch.uriProtocols=http",
    "clone",
    "-q",
    "--bare",
    `${edge.url}/${repo}`,
    dest,
  ]);
  const ms = performance.now() - start;
  await Deno.remove(dest, { recursive: true });
  return ms;
}

async function main(): Promise<void> {
  const mib = flags.number("mib", 32);
  const runs = flags.number("runs", 5);
  const repo = "bench/repo.git";
  await using origin = await startOrigin();
  await makeRepo(origin, repo, { commits: 40, targetBytes: mib << 20, seed: 11 });
  await using work = await tempDir("gitedge-bench-");
  await using deno = await startDenoEdge({
    store: `${work.path}/store`,
    config: { origin: origin.url, chunks: 4 },
  });
  await using worker = await startWorkerEdge({ config: { origin: origin.url, chunks: 4 } });
  const edges: Edge[] = [{ name: "deno", url: deno.url }, { name: "worker", url: worker.url }];
  const warmMs: Record<string, number> = {};
  for (const edge of edges) warmMs[edge.name] = await warm(edge, repo);

  const times: Record<string, number[]> = { deno: [], worker: [] };
  for (let run = 0; run < runs; run++) {
    // Alternate the order so neither edge always runs on a warmer page cache.
    const order = run % 2 === 0 ? edges : [...edges].reverse();
    for (const edge of order) {
      times[edge.name].push(await timedClone(edge, repo, `${work.path}/clone-${edge.name}`));
    }
  }
  const result = {
    repoMiB: mib,
    runs,
    warmMs,
    ms: times,
    medianMs: { deno: median(times.deno), worker: median(times.worker) },
    ratioWorkerOverDeno: median(times.worker) / median(times.deno),
  };
  printResult({
    title: `warm clone by URI, Worker (workerd, local R2) vs Deno server: ${mib} MiB repository, ` +
      `${runs} runs, medians; load ${loadavg()}`,
    headers: ["edge", "snapshot build ms", "clone median ms", "clones ms"],
    rows: edges.map((edge) => [
      edge.name,
      warmMs[edge.name].toFixed(0),
      median(times[edge.name]).toFixed(0),
      times[edge.name].map((t) => t.toFixed(0)).join(" "),
    ]),
    ratios: [`worker / deno clone: ${ratio(result.medianMs.worker, result.medianMs.deno)}`],
  });
  await Deno.mkdir("bench/out", { recursive: true });
  await Deno.writeTextFile("bench/out/worker_vs_deno.json", JSON.stringify(result, null, 2) + "\n");
}

if (import.meta.main) await main();
