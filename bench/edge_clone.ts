/**
 * Edge clone bench: on a generated repository (≥ 200 MB by default), side by side in one run,
 * interleaved round by round (the order rotates):
 *   - direct clone from the origin,
 *   - cold clone through the edge (a client that does not ask for URIs: pure proxy overhead; the
 *     edge's response cache is off, so every such clone reaches the origin), with the edge's CPU,
 *   - warm clone through the edge with packfile URIs (wall time and origin bytes),
 * after one snapshot build (timed). The edge runs as its own process (`edge/deno/cli.ts serve`) so its
 * peak RSS and CPU can be read. Medians of `--runs`.
 *
 *   deno run -A bench/edge_clone.ts [--mb 200] [--runs 3] [--chunks 4]
 */
import { git, tempDir } from "../test/support/git.ts";
import { startOrigin } from "../test/support/origin.ts";
import { makeRepo } from "../test/support/fixtures.ts";
import { interleaved, median, timed } from "./stats.ts";
import { startEdgeProcess } from "./edge_process.ts";

function flag(name: string, fallback: number): number {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : fallback;
}

const MB = flag("mb", 200);
const RUNS = flag("runs", 3);
const CHUNKS = flag("chunks", 4);

await using origin = await startOrigin();
await using work = await tempDir("gitedge-bench-");
console.log(`making a ~${MB} MB repository…`);
await makeRepo(origin, "big.git", { targetBytes: MB * 1024 * 1024, commits: 60, seed: 7 });
const repoBytes = Number(
  (await git(["count-objects", "-v"], { cwd: `${origin.root}/big.git` })).match(
    /size-pack: (\d+)/,
  )![1],
) * 1024;
console.log(`repository packs: ${(repoBytes / 1e6).toFixed(1)} MB`);

const edge = await startEdgeProcess(origin.url, `${work.path}/store`, [
  "--chunks",
  String(CHUNKS),
  "--response-cache-bytes",
  "0",
]);
let n = 0;
/** Times one bare clone (the clone is removed afterwards, untimed). */
const clone = async (url: string, extra: string[] = []) => {
  const dir = `${work.path}/c${n++}`;
  const seconds = await timed(() => git([...extra, "clone", "-q", "--bare", url, dir]));
  await Deno.remove(dir, { recursive: true });
  return seconds;
};

const warmSeconds = await timed(async () => {
  const res = await fetch(`${edge.url}/_edge/warm/big.git`, { method: "POST" });
  if (!res.ok) throw new Error(`warm failed: ${await res.text()}`);
  await res.body?.cancel();
});
const coldCpu: number[] = [];
const directBytes: number[] = [], warmBytes: number[] = [];
const [direct, cold, warm] = await interleaved(RUNS, [
  async () => {
    origin.stats.reset();
    const s = await clone(origin.repoUrl("big.git"));
    directBytes.push(origin.stats.bytesOut);
    return s;
  },
  async () => {
    const cpu0 = await edge.cpuSeconds();
    const s = await clone(`${edge.url}/big.git`);
    coldCpu.push(await edge.cpuSeconds() - cpu0);
    return s;
  },
  async () => {
    origin.stats.reset();
    const s = await clone(`${edge.url}/big.git`, ["-c", "fetch.uriProtocols=http"]);
    warmBytes.push(origin.stats.bytesOut);
    return s;
  },
]);
const peak = await edge.peakRssMiB();
await edge.stop();

const d = median(direct), c = median(cold), w = median(warm);
console.log(
  `\nedge clone bench: ${(repoBytes / 1e6).toFixed(0)} MB repository, ${RUNS} runs, medians`,
);
console.log(
  `  direct clone                 ${d.toFixed(2)} s   origin bytes ${
    (median(directBytes) / 1e6).toFixed(1)
  } MB`,
);
console.log(
  `  cold clone through edge      ${c.toFixed(2)} s   overhead ratio ${
    (c / d).toFixed(2)
  }x, edge CPU ${median(coldCpu).toFixed(2)} s`,
);
console.log(`  snapshot build (warm)        ${warmSeconds.toFixed(2)} s   ${CHUNKS} chunks`);
console.log(
  `  warm clone with URIs         ${w.toFixed(2)} s   wall ratio direct/warm ${
    (d / w).toFixed(2)
  }x`,
);
console.log(
  `  origin bytes, warm clone     ${(median(warmBytes) / 1e6).toFixed(3)} MB   ratio direct/warm ${
    (median(directBytes) / Math.max(1, median(warmBytes))).toFixed(0)
  }x`,
);
console.log(
  `  edge peak RSS                ${peak.toFixed(0)} MiB (build and all clones)`,
);
