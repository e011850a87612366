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
import {
  flags,
  interleaved,
  loadavg,
  median,
  packStats,
  printResult,
  ratio,
  startEdgeProcess,
  timed,
  warmEdge,
} from "./harness/mod.ts";

const MB = flags.number("mb", 200);
const RUNS = flags.number("runs", 3);
const CHUNKS = flags.number("chunks", 4);

await using origin = await startOrigin();
await using work = await tempDir("gitedge-bench-");
console.log(`making a ~${MB} MB repository…`);
await makeRepo(origin, "big.git", { targetBytes: MB * 1024 * 1024, commits: 60, seed: 7 });
const { packMB } = await packStats(`${origin.root}/big.git`);
console.log(`repository packs: ${packMB.toFixed(1)} MB`);

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

const warmSeconds = await timed(() => warmEdge(edge.url, "big.git"));
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
    const cpu0 = edge.cpuSeconds();
    const s = await clone(`${edge.url}/big.git`);
    coldCpu.push(edge.cpuSeconds() - cpu0);
    return s;
  },
  async () => {
    origin.stats.reset();
    const s = await clone(`${edge.url}/big.git`, ["-c", "fetch.uriProtocols=http"]);
    warmBytes.push(origin.stats.bytesOut);
    return s;
  },
]);
const peak = edge.peakRssMiB();
await edge.stop();

const d = median(direct), c = median(cold), w = median(warm);
const db = median(directBytes), wb = median(warmBytes);
printResult({
  title: `edge clone: ${packMB.toFixed(0)} MB repository, ${RUNS} runs, medians; snapshot build ${
    warmSeconds.toFixed(2)
  } s (${CHUNKS} packs); edge peak RSS ${peak.toFixed(0)} MiB; load ${loadavg()}`,
  headers: ["clone", "wall s", "origin MB", "edge CPU s"],
  rows: [
    ["direct", d.toFixed(2), (db / 1e6).toFixed(1), null],
    ["cold through the edge (no URIs, no cache)", c.toFixed(2), null, median(coldCpu).toFixed(2)],
    ["warm, stock git with URIs", w.toFixed(2), (wb / 1e6).toFixed(3), null],
  ],
  ratios: [
    `cold through the edge / direct: ${ratio(c, d)} (the proxy's overhead)`,
    `direct / warm: wall ${ratio(d, w)}, origin bytes ${ratio(db, Math.max(1, wb), 0)}`,
  ],
});
