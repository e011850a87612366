/**
 * What the origin sends over a repository's life through a Deno edge with its git mirror: the
 * first clone (which seeds the first build), then rounds of a push of 3 commits followed by a
 * plain clone through the edge (the mirror's update answers it; the snapshot's refresh follows).
 * Run twice in one process, refresh layers from the origin (`mirrorLayers: false`, as before) and
 * from the mirror, each on a fresh origin and store. The floor: the bytes of one full pack of the
 * first state plus one pack of each round's new objects (what the origin must send once).
 *
 *   deno run -A bench/mirror_layers.ts [--rounds 3] [--quick]
 *
 * `--quick`: a smaller repository. Counted at the origin (`git http-backend`): response bytes of
 * every request, and its `fetch` commands.
 */
import { git, gitBytes, tempDir } from "../test/support/git.ts";
import { startOrigin } from "../test/support/origin.ts";
import { makeRepo } from "../test/support/fixtures.ts";
import { pushCommits } from "../test/support/pushed.ts";
import { startDenoEdge } from "../edge/deno/server.ts";
import { edgeConfigFor } from "../test/support/edge.ts";

const QUICK = Deno.args.includes("--quick");
const at = Deno.args.indexOf("--rounds");
const rounds = at >= 0 ? Number(Deno.args[at + 1]) : 3;
if (!Number.isInteger(rounds) || rounds < 1) throw new RangeError("--rounds N, N >= 1");
const REPO = "life.git";

async function life(mirrorLayers: boolean) {
  await using dir = await tempDir("gitedge-bench-mlayers-");
  await using origin = await startOrigin();
  await makeRepo(origin, REPO, {
    commits: QUICK ? 12 : 40,
    binaryBytes: QUICK ? 512 * 1024 : 4 * 1024 * 1024,
  });
  const bare = `${origin.root}/${REPO}`;
  let floor = (await gitBytes(["pack-objects", "--all", "--stdout", "-q"], {
    cwd: bare,
    stdin: new Uint8Array(),
  })).byteLength;
  const edge = await startDenoEdge({
    store: `${dir.path}/store`,
    port: 0,
    config: edgeConfigFor({ origin: origin.url, chunks: 4 }),
    mirror: true,
    mirrorLayers,
    onBuildError: (path, error) => console.error(`build of ${path} failed:`, error),
  });
  try {
    const started = performance.now();
    origin.stats.reset();
    await git(["clone", "-q", "--bare", `${edge.url}/${REPO}`, `${dir.path}/c0`]);
    await edge.idle();
    const firstClone = origin.stats.bytesOut;
    let newFloor = 0;
    for (let i = 1; i <= rounds; i++) {
      const pushed = await pushCommits(origin, REPO, dir.path, 3, 64 * 1024);
      floor += pushed.packBytes;
      newFloor += pushed.packBytes;
      await git(["clone", "-q", "--bare", `${edge.url}/${REPO}`, `${dir.path}/c${i}`]);
      await edge.idle();
    }
    const metrics = await (await fetch(`${edge.url}/_edge/metrics`)).text();
    const layers = Number(/^gitedge_mirror_layers_total (\d+)/m.exec(metrics)?.[1] ?? 0);
    return {
      bytes: origin.stats.bytesOut,
      rounds: origin.stats.bytesOut - firstClone,
      newFloor,
      fetches: origin.stats.commands["fetch"] ?? 0,
      floor,
      layers,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await edge.stop();
  }
}

const before = await life(false);
const after = await life(true);
const mb = (n: number) => (n / 1e6).toFixed(3);
console.log(
  `origin bytes over a repository's life: first clone + ${rounds} rounds of (push 3 commits, clone)`,
);
console.log(
  "| refresh layers | origin MB (life) | floor MB | x floor | MB after the first clone | " +
    "new objects MB | x new | origin fetches | layers from mirror |",
);
for (const [name, r] of [["from the origin", before], ["from the mirror", after]] as const) {
  console.log(
    `| ${name} | ${mb(r.bytes)} | ${mb(r.floor)} | ${(r.bytes / r.floor).toFixed(3)} | ${
      mb(r.rounds)
    } | ${mb(r.newFloor)} | ${(r.rounds / r.newFloor).toFixed(3)} | ${r.fetches} | ${r.layers} |`,
  );
}
console.log(`after/before: ${(after.bytes / before.bytes).toFixed(3)}`);
console.log(`load average: ${Deno.loadavg().map((n) => n.toFixed(1)).join(" ")}`);
