/**
 * A CI burst: N runners cloning one commit at once, directly from the origin and through a warm
 * edge, side by side in one run. Kinds: `--depth 1` clones, `--filter=blob:none` clones (with
 * the lazy blob fetch of their checkout), and full clones (through the edge with packfile URIs,
 * as docs/ci.md's recipe sets up). Per kind and competitor: burst wall time, origin requests,
 * origin `fetch` commands (the ones that make it compute a pack), origin CPU seconds (the origin
 * runs in its own process: its backends' CPU is read from /proc), edge CPU seconds.
 *
 * The edge is warm (snapshot built) but its response cache starts empty for every edge burst,
 * so the figures include the one miss per distinct request. Rounds are interleaved (direct, edge;
 * then edge, direct, ...); with `--runs` > 1 the table shows medians.
 *
 * Repository: git's history to v2.0.0 (`/work/shared/data/git-v2.0.0.bundle`, 165k objects).
 *
 *   deno run -A bench/ci_burst.ts [--n 20] [--runs 1] [--kinds depth,filter,full]
 */
import { git, tempDir } from "../test/support/git.ts";
import {
  bareFromBundle,
  flags,
  GIT_BUNDLE,
  loadavg,
  median,
  printResult,
  ratio,
  spawnOrigin,
  startEdgeProcess,
  warmEdge,
} from "./harness/mod.ts";

const N = flags.number("n", 20);
const RUNS = flags.number("runs", 1);
const KINDS = flags.list("kinds", ["depth", "filter", "full"]);
const BUNDLE = flags.string("bundle", GIT_BUNDLE);

const CLONE_ARGS: Record<string, string[]> = {
  depth: ["--depth", "1"],
  filter: ["--filter=blob:none"],
  full: [],
};

interface Burst {
  wall: number;
  originRequests: number;
  originFetches: number;
  originCpu: number;
  edgeCpu: number;
}

await using work = await tempDir("gitedge-ciburst-");
const root = `${work.path}/origin`;
await Deno.mkdir(root);
console.log(`cloning ${BUNDLE} into the origin…`);
await bareFromBundle(`${root}/git.git`, BUNDLE);
for (
  const [k, v] of [["uploadpack.allowFilter", "true"], ["uploadpack.allowAnySHA1InWant", "true"]]
) {
  await git(["config", k, v], { cwd: `${root}/git.git` });
}

const origin = await spawnOrigin(root);
const store = `${work.path}/store`;
const edge = await startEdgeProcess(origin.url, store);
try {
  console.log("warming the edge…");
  await warmEdge(edge.url, "git.git");

  let dirs = 0;
  const burst = async (kind: string, viaEdge: boolean): Promise<Burst> => {
    if (viaEdge) await Deno.remove(`${store}/cache`, { recursive: true }).catch(() => {});
    const url = viaEdge ? `${edge.url}/git.git` : `${origin.url}/git.git`;
    const pre = viaEdge ? ["-c", "fetch.uriProtocols=http"] : [];
    const base = dirs;
    dirs += N;
    await origin.reset();
    const edgeCpu0 = edge.cpuSeconds();
    const origin0 = await origin.stats();
    const t0 = performance.now();
    await Promise.all(
      Array.from(
        { length: N },
        (_, i) =>
          git([...pre, "clone", "-q", ...CLONE_ARGS[kind], url, `${work.path}/c${base + i}`]),
      ),
    );
    const wall = (performance.now() - t0) / 1000;
    const after = await origin.stats();
    const edgeCpu = edge.cpuSeconds() - edgeCpu0;
    await Promise.all(
      Array.from(
        { length: N },
        (_, i) => Deno.remove(`${work.path}/c${base + i}`, { recursive: true }),
      ),
    );
    return {
      wall,
      originRequests: after.requests,
      originFetches: after.commands.fetch ?? 0,
      originCpu: after.cpu - origin0.cpu,
      edgeCpu: viaEdge ? edgeCpu : 0,
    };
  };

  const results: Record<string, { direct: Burst[]; edge: Burst[] }> = {};
  for (const kind of KINDS) results[kind] = { direct: [], edge: [] };
  for (let r = 0; r < RUNS; r++) {
    for (const kind of KINDS) {
      const order = r % 2 === 0 ? [false, true] : [true, false];
      for (const viaEdge of order) {
        const b = await burst(kind, viaEdge);
        results[kind][viaEdge ? "edge" : "direct"].push(b);
        console.log(
          `  run ${r + 1} ${kind.padEnd(6)} ${viaEdge ? "edge  " : "direct"} wall ${
            b.wall.toFixed(2)
          } s, origin ${b.originRequests} requests / ${b.originFetches} fetches / ${
            b.originCpu.toFixed(2)
          } CPU s, edge ${b.edgeCpu.toFixed(2)} CPU s`,
        );
      }
    }
  }

  const m = (bs: Burst[], k: keyof Burst) => median(bs.map((b) => b[k]));
  const rows = KINDS.flatMap((kind) =>
    (["direct", "edge"] as const).map((via) => {
      const bs = results[kind][via];
      return [
        kind,
        via,
        m(bs, "wall").toFixed(2),
        m(bs, "originRequests"),
        m(bs, "originFetches"),
        m(bs, "originCpu").toFixed(2),
        via === "edge" ? m(bs, "edgeCpu").toFixed(2) : null,
      ];
    })
  );
  printResult({
    title: `CI burst: ${N} concurrent clones per burst, ${RUNS} run(s), medians; load ${loadavg()}`,
    headers: ["kind", "via", "wall s", "origin req", "origin fetch", "origin CPU s", "edge CPU s"],
    rows,
    ratios: KINDS.map((kind) => {
      const d = results[kind].direct, e = results[kind].edge;
      return `${kind}: direct/edge wall ${ratio(m(d, "wall"), m(e, "wall"))}, origin CPU ${
        ratio(m(d, "originCpu"), Math.max(0.01, m(e, "originCpu")), 1)
      }, origin fetches ${m(d, "originFetches")} → ${m(e, "originFetches")}`;
    }),
  });
} finally {
  await edge.stop();
  await origin.stop();
}
