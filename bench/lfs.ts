/**
 * Git LFS over a simulated WAN: a repository of LFS objects cloned directly and through the edge
 * (first clone: the edge's store empty; second: a fresh clone with the objects in the store), and
 * the same direct clone with no WAN (the floor: git's and git-lfs's own costs). Stock git with
 * Debian's git-lfs, its own parallelism (`lfs.concurrenttransfers`) untouched. Topology as in
 * bench/wan.ts: {edge, direct clients} ↔ WAN ↔ origin (git http-backend with the harness's LFS
 * server, test/support/lfs_origin.ts), clients ↔ LAN ↔ edge (`gitedge serve` in its own process).
 * Reports wall (median), origin LFS object bytes per clone, and ratios within the run.
 *
 *   deno run -A bench/lfs.ts [--quick] [--runs 3] [--objects 50] [--mib 2] [--rtt 80] [--mbit 100]
 *
 * `--quick`: 10 objects of 512 KiB, one run. Also bench/wan.ts's `lfs` scenario.
 */
import { tempDir } from "../test/support/git.ts";
import { lfsGit, makeLfsRepo, startLfsOrigin } from "../test/support/lfs_origin.ts";
import { SeededRandom } from "../test/support/random.ts";
import { flags, median, settleDisk, startEdgeProcess, timed } from "./harness/mod.ts";
import { startLink } from "./wan_link.ts";

export interface LfsBenchOptions {
  objects: number;
  bytesEach: number;
  runs: number;
  rttMs: number;
  mbit: number;
  lanRttMs: number;
  lanMbit: number;
}

export interface LfsBenchRow {
  who: "direct" | "edge first" | "edge second" | "no WAN";
  wall: number;
  /** Origin LFS object bytes (median per clone). */
  originBytes: number;
}

const loadavg = () => Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");

/** Runs the LFS bench; prints each clone and the table; returns the rows. */
export async function lfsBench(o: LfsBenchOptions): Promise<LfsBenchRow[]> {
  await using work = await tempDir("gitedge-lfs-bench-");
  await using origin = await startLfsOrigin({ users: { bench: "bench" } });
  const rnd = new SeededRandom(11);
  const files: Record<string, Uint8Array> = {};
  for (let i = 0; i < o.objects; i++) files[`assets/a${i}.bin`] = rnd.bytes(o.bytesEach);
  await makeLfsRepo(origin, "lfs.git", files, "bench:bench");
  const total = o.objects * o.bytesEach;
  const linkOpts = { handshake: true, initialWindow: 10 };
  await using wan = startLink(new URL(origin.url).host, {
    rttMs: o.rttMs,
    mbitPerSecond: o.mbit,
    ...linkOpts,
  });
  const store = `${work.path}/store`;
  const edge = await startEdgeProcess(wan.url, store);
  await using lan = startLink(new URL(edge.url).host, {
    rttMs: o.lanRttMs,
    mbitPerSecond: o.lanMbit,
    ...linkOpts,
  });
  console.log(
    `LFS: ${o.objects} objects of ${(o.bytesEach / 2 ** 20).toFixed(2)} MiB (${
      (total / 1e6).toFixed(1)
    } MB); WAN ${o.rttMs} ms RTT, ${o.mbit} Mbit/s; LAN ${o.lanRttMs} ms, ${o.lanMbit} Mbit/s; load ${loadavg()}`,
  );
  let n = 0;
  const samples = new Map<LfsBenchRow["who"], { wall: number; bytes: number }[]>();
  const clone = async (who: LfsBenchRow["who"], url: string) => {
    const dir = `${work.path}/c${n++}`;
    await settleDisk();
    origin.resetStats();
    const wall = await timed(() => lfsGit(["clone", "-q", url, dir]));
    const bytes = origin.stats.objectBytes;
    samples.set(who, [...(samples.get(who) ?? []), { wall, bytes }]);
    console.log(
      `  ${who}: ${wall.toFixed(2)} s, origin LFS ${(bytes / 1e6).toFixed(1)} MB; load ${
        loadavg().split(" ")[0]
      }`,
    );
    await Deno.remove(dir, { recursive: true });
  };
  try {
    for (let run = 0; run < o.runs; run++) {
      // A cold store each run: the edge's LFS objects go, its Git snapshot (small) stays.
      await Deno.remove(`${store}/lfs`, { recursive: true }).catch(() => {});
      await clone("direct", `${wan.url}/lfs.git`);
      await clone("edge first", `${lan.url}/lfs.git`);
      await clone("edge second", `${lan.url}/lfs.git`);
      await clone("no WAN", `${origin.url}/lfs.git`);
    }
  } finally {
    await edge.stop();
  }
  const rows = [...samples].map(([who, xs]): LfsBenchRow => ({
    who,
    wall: median(xs.map((x) => x.wall)),
    originBytes: median(xs.map((x) => x.bytes)),
  }));
  const wall = (who: string) => rows.find((r) => r.who === who)!.wall;
  console.log(`\nLFS clones, ${o.runs} run(s), medians; load ${loadavg()}`);
  console.log("| clone | wall s | / direct | / no WAN | origin LFS MB |");
  console.log("|---|---|---|---|---|");
  for (const r of rows) {
    console.log(
      `| ${r.who} | ${r.wall.toFixed(2)} | ${(r.wall / wall("direct")).toFixed(2)}x | ${
        (r.wall / wall("no WAN")).toFixed(2)
      }x | ${(r.originBytes / 1e6).toFixed(1)} |`,
    );
  }
  return rows;
}

if (import.meta.main) {
  const quick = Deno.args.includes("--quick");
  await lfsBench({
    objects: Number(flags.string("objects", quick ? "10" : "50")),
    bytesEach: Math.round(Number(flags.string("mib", quick ? "0.5" : "2")) * 2 ** 20),
    runs: Number(flags.string("runs", quick ? "1" : "3")),
    rttMs: Number(flags.string("rtt", "80")),
    mbit: Number(flags.string("mbit", "100")),
    lanRttMs: Number(flags.string("lan-rtt", "1")),
    lanMbit: Number(flags.string("lan-mbit", "1000")),
  });
}
