/**
 * Warm clones of a real repository against their floor, in one run: git's history to v2.0.0
 * (`/work/shared/data/git-v2.0.0.bundle`, 165k objects), or with `--repo big` the generated
 * repository of git.git's class (848,812 objects, test/support/big_repo.ts, from the fixture
 * cache), behind a warm edge. Competitors, bare
 * clones, rounds interleaved:
 *   - direct `git clone` from the origin;
 *   - stock git through the edge with packfile URIs (it indexes the packs one after another);
 *   - `gitedge clone --jobs 8` (packs spooled to files and indexed once complete on a fast link);
 *   - `gitedge clone --jobs 8 --spool never` (every pack streamed into index-pack as it comes);
 *   - `gitedge clone --jobs 8 --trust-edge-index` (the edge runs with `--pack-indexes on`: it
 *     keeps each pack's `.idx`, and this client checks checksums instead of running index-pack);
 *   - `gitedge clone --jobs 8` with its connectivity check as one walk (`GITEDGE_CONNECTIVITY_WALKS=1`, git's way)
 *     instead of one per core.
 * The floor, measured in the same run on the same snapshot packs (copied from the edge's store):
 * `git index-pack` of every pack at once (every core busy) plus the connectivity walk
 * (`git rev-list --objects --all`); and the sequential floor (packs indexed one after another,
 * as stock git does, plus the walk); and that floor done the way stock git indexes
 * (`index-pack --stdin` fed each file, which copies and flushes it). Also the bytes the origin
 * sent per clone.
 *
 *   deno run -A bench/warm_floor.ts [--runs 1] [--chunks 4] [--bundle PATH] [--repo git|big]
 *
 * Every clone and floor starts after `sync`, so none pays for the write-back of the one before.
 * Each figure is printed with the load average when it ended (other work may share the machine),
 * and each clone with the CPU seconds of the client (with its gits) and of the edge serving it.
 * The edge's index build time is the time from the last snapshot pack written to the last index.
 */
import { git, tempDir } from "../test/support/git.ts";
import { cloneJson } from "../test/support/cli_process.ts";
import { repoId } from "../src/proxy/core/repo.ts";
import type { Manifest } from "../src/proxy/core/manifest.ts";
import { copyBigRepoInto } from "../test/support/big_repo.ts";
import {
  bareFromBundle,
  type Cell,
  cpuTimes,
  flags,
  GIT_BUNDLE,
  loadavg,
  median,
  packStats,
  printResult,
  ratio,
  settleDisk,
  spawnOrigin,
  startEdgeProcess,
  timed,
  warmEdge,
} from "./harness/mod.ts";

const RUNS = flags.number("runs", 1);
const CHUNKS = String(flags.number("chunks", 4));
const BUNDLE = flags.string("bundle", GIT_BUNDLE);
const REPO = flags.string("repo", "git");

await using work = await tempDir("gitedge-floor-");
const root = `${work.path}/origin`;
await Deno.mkdir(root);
if (REPO === "big") {
  console.log("git.git-sized repository from the fixture cache (first run: generating)…");
  await git(["init", "-q", "--bare", "--initial-branch=main", `${root}/git.git`]);
  await copyBigRepoInto(`${root}/git.git`);
} else {
  await bareFromBundle(`${root}/git.git`, BUNDLE);
}
const { objects: OBJECTS, packMB: PACK_MB } = await packStats(`${root}/git.git`);
const NAME = REPO === "big" ? "the generated git.git-sized repository" : "git v2.0.0";
console.log(`repository: ${NAME}, ${OBJECTS} objects, ${PACK_MB.toFixed(0)} MB of packs`);
/** User + system CPU seconds of this process's reaped children (the clients and their gits). */
const childCpu = () => cpuTimes().children;
const origin = await spawnOrigin(root);
const store = `${work.path}/store`;
const edge = await startEdgeProcess(origin.url, store, [
  "--chunks",
  CHUNKS,
  "--pack-indexes",
  "on",
]);
try {
  const warmSeconds = await timed(() => warmEdge(edge.url, "git.git"));
  console.log(`snapshot build (Deno server): ${warmSeconds.toFixed(1)} s; load ${loadavg()}`);
  const id = repoId(`${origin.url}/git.git`);
  const manifest = JSON.parse(
    await Deno.readTextFile(`${store}/repos/${id}/manifest.json`),
  ) as Manifest;
  const packs = manifest.layers.flat();
  const mtime = async (key: string) => (await Deno.stat(`${store}/${key}`)).mtime!.getTime();
  const packsWritten = Math.max(...await Promise.all(packs.map((p) => mtime(p.key))));
  const indexesWritten = Math.max(...await Promise.all(packs.map((p) => mtime(p.index!.key))));
  console.log(
    `  of which the edge's pack indexes (git index-pack, one pack after another): ${
      ((indexesWritten - packsWritten) / 1000).toFixed(1)
    } s`,
  );
  console.log(
    `snapshot: ${packs.length} packs, ${
      packs.map((p) => (p.size / 1e6).toFixed(1)).join(" + ")
    } MB`,
  );

  let n = 0;
  const dir = () => `${work.path}/c${n++}`;
  const competitors: [string, () => Promise<number>][] = [
    ["direct git clone", () => git(["clone", "-q", "--bare", `${origin.url}/git.git`, dir()])],
    [
      "stock git, URIs",
      () =>
        git([
          "-c",
          "fetch.uriProtocols=http",
          "clone",
          "-q",
          "--bare",
          `${edge.url}/git.git`,
          dir(),
        ]),
    ],
    [
      "gitedge clone -j8",
      async () => {
        const summary = await cloneJson(
          ["--bare", "--jobs", "8", `${edge.url}/git.git`, dir()],
          Deno.cwd(),
        );
        // When each of the clone's steps ended: where its time beyond the floor goes.
        console.log(`  gitedge clone phases (s since start): ${JSON.stringify(summary.phases)}`);
      },
    ],
    [
      "gitedge -j8 stream",
      async () => {
        const summary = await cloneJson(
          ["--bare", "--jobs", "8", "--spool", "never", `${edge.url}/git.git`, dir()],
          Deno.cwd(),
        );
        console.log(`  streamed clone phases (s since start): ${JSON.stringify(summary.phases)}`);
      },
    ],
    [
      "gitedge -j8 trusted",
      async () => {
        const summary = await cloneJson(
          ["--bare", "--jobs", "8", "--trust-edge-index", `${edge.url}/git.git`, dir()],
          Deno.cwd(),
        );
        const trusted = (summary.packs as { edgeIndex?: boolean }[]).filter((p) => p.edgeIndex);
        if (trusted.length !== packs.length) {
          throw new Error(`only ${trusted.length} of ${packs.length} packs came with an index`);
        }
        console.log(`  trusted clone phases (s since start): ${JSON.stringify(summary.phases)}`);
      },
    ],
    [
      // The connectivity check as one walk (git's way), against the default (one per core).
      "gitedge clone, 1 walk",
      async () => {
        Deno.env.set("GITEDGE_CONNECTIVITY_WALKS", "1");
        try {
          const summary = await cloneJson(
            ["--bare", "--jobs", "8", `${edge.url}/git.git`, dir()],
            Deno.cwd(),
          );
          console.log(`  1-walk clone phases (s since start): ${JSON.stringify(summary.phases)}`);
        } finally {
          Deno.env.delete("GITEDGE_CONNECTIVITY_WALKS");
        }
      },
    ],
  ].map(([label, run]) => [label as string, () => timed(run as () => Promise<unknown>)]);

  /**
   * Stock git's own indexing, one pack after another: `git index-pack --stdin` fed each downloaded
   * file, as git's `http-fetch` does, so it copies the pack and flushes it (core.fsync), then the
   * walk. No download, no negotiation: what stock git with URIs cannot avoid.
   */
  const stdinFloor = async () => {
    const repo = dir();
    await git(["init", "-q", "--bare", repo]);
    await settleDisk();
    const indexing = await timed(async () => {
      for (const p of packs) {
        const file = await Deno.open(`${store}/${p.key}`);
        const out = await new Deno.Command("git", {
          args: ["index-pack", "--stdin"],
          cwd: repo,
          stdin: "piped",
          stdout: "null",
        }).spawn();
        await file.readable.pipeTo(out.stdin);
        if (!(await out.status).success) throw new Error(`index-pack --stdin failed on ${p.key}`);
      }
    });
    const refs = Object.entries(manifest.tips).map(([ref, oid]) => `create ${ref} ${oid}`);
    await git(["update-ref", "--stdin"], {
      cwd: repo,
      stdin: new TextEncoder().encode(refs.join("\n") + "\n"),
    });
    const walk = await timed(() =>
      git(["rev-list", "--objects", "--all", "--quiet"], { cwd: repo })
    );
    return indexing + walk;
  };

  /** The floor: index the snapshot packs (all at once, or one by one), then the walk. */
  const floor = async (parallel: boolean) => {
    const repo = dir();
    await git(["init", "-q", "--bare", repo]);
    const files = await Promise.all(packs.map(async (p, i) => {
      const file = `${repo}/objects/pack/p${i}.pack`;
      await Deno.copyFile(`${store}/${p.key}`, file);
      return file;
    }));
    await settleDisk(); // the copies' write-back is not the floor's
    const index = (f: string) => git(["index-pack", f], { cwd: repo });
    const cpu0 = childCpu();
    const indexing = await timed(async () => {
      if (parallel) await Promise.all(files.map(index));
      else for (const f of files) await index(f);
    });
    const refs = Object.entries(manifest.tips).map(([ref, oid]) => `create ${ref} ${oid}`);
    await git(["update-ref", "--stdin"], {
      cwd: repo,
      stdin: new TextEncoder().encode(refs.join("\n") + "\n"),
    });
    const indexCpu = childCpu() - cpu0;
    const walk = await timed(() =>
      git(["rev-list", "--objects", "--all", "--quiet"], { cwd: repo })
    );
    return { indexing, walk, indexCpu };
  };

  const wall: Record<string, number[]> = {};
  const bytes: Record<string, number[]> = {};
  const cpu: Record<string, number[]> = {};
  const floors = {
    parallel: [] as number[],
    sequential: [] as number[],
    walk: [] as number[],
    index: [] as number[],
    indexSeq: [] as number[],
    stdin: [] as number[],
  };
  for (let r = 0; r < RUNS; r++) {
    const order = r % 2 === 0 ? competitors : [...competitors].reverse();
    for (const [label, run] of order) {
      await origin.reset();
      await settleDisk();
      const [client0, edge0] = [childCpu(), edge.cpuSeconds()];
      const s = await run();
      const client = childCpu() - client0, edgeCpu = edge.cpuSeconds() - edge0;
      (wall[label] ??= []).push(s);
      (cpu[label] ??= []).push(client);
      (bytes[label] ??= []).push((await origin.stats()).bytesOut);
      console.log(
        `  run ${r + 1} ${label}: ${s.toFixed(2)} s; CPU: client and its gits ${
          client.toFixed(2)
        } s, edge ${edgeCpu.toFixed(2)} s; load ${loadavg()}`,
      );
    }
    const p = await floor(true);
    const q = await floor(false);
    const g = await stdinFloor();
    floors.stdin.push(g);
    floors.index.push(p.indexing);
    floors.indexSeq.push(q.indexing);
    floors.walk.push(p.walk);
    floors.parallel.push(p.indexing + p.walk);
    floors.sequential.push(q.indexing + q.walk);
    console.log(
      `  run ${r + 1} floor: index-pack all at once ${p.indexing.toFixed(2)} s, one by one ${
        q.indexing.toFixed(2)
      } s (as stock git does it, --stdin, with the walk: ${g.toFixed(2)} s), rev-list --objects ${
        p.walk.toFixed(2)
      } s; index-pack CPU ${p.indexCpu.toFixed(2)} s; load ${loadavg()}`,
    );
  }
  const direct = median(wall["direct git clone"]);
  const fp = median(floors.parallel), fs = median(floors.sequential), fg = median(floors.stdin);
  const directBytes = median(bytes["direct git clone"]);
  const rows: Cell[][] = competitors.map(([label]) => {
    const w = median(wall[label]);
    const f = label.startsWith("stock") ? fs : fp;
    const b = median(bytes[label]);
    return [
      label,
      w.toFixed(2),
      ratio(direct, w),
      ratio(w, f),
      (b / 1e6).toFixed(3),
      `${(b / directBytes * 100).toFixed(3)}%`,
      median(cpu[label]).toFixed(2),
    ];
  });
  rows.push(
    [
      `floor: parallel index-pack + walk (index ${median(floors.index).toFixed(2)})`,
      fp.toFixed(2),
      ratio(direct, fp),
      "1.00x",
      null,
      null,
      null,
    ],
    [
      `floor: sequential index-pack + walk (index ${median(floors.indexSeq).toFixed(2)})`,
      fs.toFixed(2),
      ratio(direct, fs),
      "1.00x",
      null,
      null,
      null,
    ],
    [
      "floor: sequential index-pack --stdin + walk",
      fg.toFixed(2),
      ratio(direct, fg),
      null,
      null,
      null,
      null,
    ],
  );
  const usual = median(wall["gitedge clone -j8"]);
  const trusted = median(wall["gitedge -j8 trusted"]);
  printResult({
    title: `warm clones of ${NAME} (bare), ${RUNS} run(s), medians; walk ${
      median(floors.walk).toFixed(2)
    } s; load ${loadavg()}`,
    headers: [
      "competitor",
      "wall s",
      "direct / it",
      "it / its floor",
      "origin MB",
      "origin % of direct",
      "client CPU s",
    ],
    rows,
    ratios: [
      "its floor: the sequential one for stock git (it indexes one pack after another), the parallel one otherwise",
      `stock git, URIs / the floor done its own way (index-pack --stdin): ${
        ratio(median(wall["stock git, URIs"]), fg)
      }`,
      `--trust-edge-index: ${ratio(usual, trusted)} faster than gitedge clone -j8 (${
        trusted.toFixed(2)
      } s vs ${usual.toFixed(2)} s), ${ratio(trusted, fp)} its index-pack floor`,
    ],
  });
} finally {
  await edge.stop();
  await origin.stop();
}
