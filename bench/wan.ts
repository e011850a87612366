/**
 * Clones over a simulated WAN, through the edge and directly, side by side in one run. Topology
 * (bench/wan_link.ts): {edge, direct clients} ↔ WAN ↔ origin, and clients ↔ LAN ↔ edge. The WAN
 * has one-way delay, one bandwidth shared by all connections, a handshake and slow start per
 * connection; defaults 80 ms RTT and 100 Mbit/s; the LAN 1 ms and 1 Gbit/s. Origin: `git
 * http-backend` in its own process (bench/origin_process.ts); edge: `gitedge serve` in its own.
 *
 * Scenarios (`--scenarios full,small,cold,depth,burst,fetch,newtip`; also `fetchn`):
 *   full   warm full clone of the big repository: direct `git clone` vs stock git with packfile
 *          URIs vs `gitedge clone --jobs 8`, and the client floor: `git index-pack` of the
 *          snapshot's packs (all at once), the connectivity walk and the checkout (as
 *          bench/warm_floor.ts measures it, plus the checkout);
 *   small  the same for a small repository (warm);
 *   cold   the first clone of a never-seen copy of the big repository, stock git with
 *          `fetch.uriProtocols`; origin bytes also count the snapshot build it starts (until the
 *          edge reports the snapshot ready);
 *   depth  a `--depth 1` clone, the 2nd time (the edge's response cache is warm);
 *   burst  `--n` (10) concurrent `--depth 1` clones, the 2nd time;
 *   fetch  `git fetch` in yesterday's clone after 20 new commits (edge snapshot of yesterday).
 *   newtip a tip pushed after the edge's snapshot (3 new commits), cloned the first time:
 *          `--depth 1` and `--filter=blob:none` (checkout included), direct vs through the edge
 *          (its git mirror answers; the origin sends the new commits once), and each with no
 *          WAN (loopback to the origin: git's own floor);
 *   fetchn `--n` (10) runners restored from the same clone of yesterday run `git fetch` at once
 *          after 20 new commits (half with `fetch.uriProtocols`); also prints the packs the origin
 *          computed (its `fetch` commands) for each side; "no WAN" fetches from the origin over
 *          loopback (the clients' and the origin's own work: the floor of both).
 *   lfs    (only when named) a repository of LFS objects (50 of 2 MB; `--quick` 10 of 512 KiB)
 *          cloned directly, through the edge the first and the second time, and with no WAN,
 *          over the same link settings: bench/lfs.ts, with its own origin (git-lfs needs an LFS
 *          server) and edge.
 * Per competitor: wall (median), origin requests, origin bytes, origin packs (`fetch` commands the
 * origin answered), WAN round trips on the critical path (the longest chain of non-overlapping
 * handshakes and request/response turns the WAN saw) and new WAN connections; ratios are edge /
 * direct within the run. Warm scenarios also time the same direct clone over loopback (no WAN):
 * git's own fixed costs, below which no edge gets a clone.
 *
 * The big repository is git's history to v2.0.0 (`--bundle`, default
 * /work/shared/data/git-v2.0.0.bundle); `--quick` uses a generated 20 MB repository instead and
 * one run.
 *
 *   deno run -A bench/wan.ts [--quick] [--runs 1] [--rtt 80] [--mbit 100] [--lan-rtt 1]
 *     [--lan-mbit 1000] [--n 10] [--scenarios ...] [--initial-window 10] [--no-handshake]
 */
import { git, tempDir } from "../test/support/git.ts";
import { addCommits, makeRepo } from "../test/support/fixtures.ts";
import type { Origin } from "../test/support/origin.ts";
import { cloneJson } from "../test/support/cli_process.ts";
import { repoId } from "../src/proxy/core/repo.ts";
import type { Manifest } from "../src/proxy/core/manifest.ts";
import { flags, median, settleDisk, spawnOrigin, startEdgeProcess, timed } from "./harness/mod.ts";
import { type Link, startLink } from "./wan_link.ts";
import { lfsBench } from "./lfs.ts";

const flag = (name: string, fallback: string) => flags.string(name, fallback);
const QUICK = Deno.args.includes("--quick");
const RUNS = Number(flag("runs", "1"));
const RTT = Number(flag("rtt", "80"));
const MBIT = Number(flag("mbit", "100"));
const LAN_RTT = Number(flag("lan-rtt", "1"));
const LAN_MBIT = Number(flag("lan-mbit", "1000"));
const N = Number(flag("n", "10"));
const IW = Number(flag("initial-window", "10"));
const HANDSHAKE = !Deno.args.includes("--no-handshake");
const SCENARIOS = flag("scenarios", "full,small,cold,depth,burst,fetch,newtip").split(",");
const BUNDLE = flag("bundle", "/work/shared/data/git-v2.0.0.bundle");

const loadavg = async () =>
  (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");

await using work = await tempDir("gitedge-wan-");
const root = `${work.path}/origin`;
await Deno.mkdir(root);
/** Enough of an Origin for the fixture helpers (they only create and name repositories). */
const fixtureOrigin = {
  root,
  createBare: async (name: string) => {
    await git(["init", "-q", "--bare", "--initial-branch=main", `${root}/${name}`]);
    return `${root}/${name}`;
  },
  repoUrl: (name: string) => `${root}/${name}`,
} as unknown as Origin;

const BIG = "big.git", SMALL = "small.git";
if (QUICK) {
  await makeRepo(fixtureOrigin, BIG, { commits: 200, binaryBytes: 20 * 1024 * 1024, seed: 7 });
} else {
  await git(["clone", "-q", "--bare", BUNDLE, `${root}/${BIG}`]);
  await git(["symbolic-ref", "HEAD", "refs/heads/master"], { cwd: `${root}/${BIG}` });
}
await makeRepo(fixtureOrigin, SMALL, { commits: 12, binaryBytes: 64 * 1024, seed: 3 });
for (const name of [BIG, SMALL]) {
  await git(["config", "uploadpack.allowAnySHA1InWant", "true"], { cwd: `${root}/${name}` });
  // Partial clones, as forges allow them.
  await git(["config", "uploadpack.allowFilter", "true"], { cwd: `${root}/${name}` });
}
const counts = await git(["count-objects", "-v"], { cwd: `${root}/${BIG}` });
console.log(
  `big repository: ${QUICK ? "generated (--quick)" : "git v2.0.0"}, ${
    /in-pack: (\d+)/.exec(counts)![1]
  } objects, ${(Number(/size-pack: (\d+)/.exec(counts)![1]) * 1024 / 1e6).toFixed(0)} MB`,
);

const origin = await spawnOrigin(root);
const linkOpts = { handshake: HANDSHAKE, initialWindow: IW };
const wan: Link = startLink(new URL(origin.url).host, {
  rttMs: RTT,
  mbitPerSecond: MBIT,
  ...linkOpts,
});
const store = `${work.path}/store`;
const edge = await startEdgeProcess(wan.url, store);
const lan: Link = startLink(new URL(edge.url).host, {
  rttMs: LAN_RTT,
  mbitPerSecond: LAN_MBIT,
  ...linkOpts,
});
console.log(
  `WAN ${RTT} ms RTT, ${MBIT} Mbit/s shared, initial window ${IW} segments, handshake ${
    HANDSHAKE ? "on" : "off"
  }; LAN ${LAN_RTT} ms, ${LAN_MBIT} Mbit/s; load ${await loadavg()}`,
);

interface Sample {
  wall: number;
  requests: number;
  bytes: number;
  roundTrips: number;
  connections: number;
  /** Origin `fetch` commands: packs the origin computed (an edge answer from its store: none). */
  packs: number;
}
const results = new Map<string, Map<string, Sample[]>>();
const record = (scenario: string, who: string, s: Sample) => {
  const m = results.get(scenario) ?? new Map<string, Sample[]>();
  results.set(scenario, m);
  m.set(who, [...(m.get(who) ?? []), s]);
  console.log(
    `  ${scenario} ${who}: ${s.wall.toFixed(2)} s, origin ${s.requests} req ${
      (s.bytes / 1e6).toFixed(3)
    } MB ${s.packs} packs, WAN ${s.roundTrips} serial round trips over ${s.connections} new connections; load ${
      (Deno.readTextFileSync("/proc/loadavg")).split(" ")[0]
    }`,
  );
};

/** Runs `fn` with fresh counters; `settle` (optional) runs after the timing, still counted. */
async function measure(fn: () => Promise<unknown>, settle?: () => Promise<void>): Promise<Sample> {
  await settleDisk();
  await origin.reset();
  wan.reset();
  const wall = await timed(fn);
  const trips = wan.stats();
  if (settle) await settle();
  const o = await origin.stats();
  return {
    wall,
    requests: o.requests,
    bytes: o.bytesOut,
    roundTrips: trips.criticalRoundTrips,
    connections: trips.connections,
    packs: o.commands.fetch ?? 0,
  };
}

let dirs = 0;
const dir = () => `${work.path}/c${dirs++}`;
const direct = (name: string) => `${wan.url}/${name}`;
const NO_LAN = Deno.args.includes("--no-lan");
const viaEdge = (name: string) => `${NO_LAN ? edge.url : lan.url}/${name}`;
const URIS = ["-c", "fetch.uriProtocols=http"];
const clean = (d: string) => Deno.remove(d, { recursive: true }).catch(() => {});

async function warm(name: string) {
  const res = await fetch(`${edge.url}/_edge/warm/${name}`, { method: "POST" });
  if (!res.ok) throw new Error(`warm failed: ${await res.text()}`);
  await res.body?.cancel();
}
async function snapshotReady(name: string) {
  for (let i = 0; i < 1200; i++) {
    const res = await fetch(`${edge.url}/_edge/status/${name}`);
    const body = await res.json() as { snapshot: { state: string } };
    if (body.snapshot.state === "ready") return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no snapshot of ${name} after 120 s`);
}

/** The client floor: index-pack of the snapshot packs at once, the walk, the checkout. */
async function floor(name: string): Promise<number> {
  const id = repoId(`${wan.url}/${name}`);
  const manifest = JSON.parse(
    await Deno.readTextFile(`${store}/repos/${id}/manifest.json`),
  ) as Manifest;
  const repo = dir();
  await git(["init", "-q", repo]);
  const files = await Promise.all(
    manifest.layers.flat().map(async (p, i) => {
      const file = `${repo}/.git/objects/pack/p${i}.pack`;
      await Deno.copyFile(`${store}/${p.key}`, file);
      return file;
    }),
  );
  const refs = Object.entries(manifest.tips).map(([ref, oid]) => `create ${ref} ${oid}`);
  await settleDisk();
  const s = await timed(async () => {
    await Promise.all(files.map((f) => git(["index-pack", f], { cwd: repo })));
    await git(["update-ref", "--stdin"], {
      cwd: repo,
      stdin: new TextEncoder().encode(refs.join("\n") + "\n"),
    });
    await git(["rev-list", "--objects", "--all", "--quiet"], { cwd: repo });
    const head = manifest.tips["refs/heads/master"] ?? manifest.tips["refs/heads/main"];
    await git(["checkout", "-q", "--detach", head], { cwd: repo });
  });
  await clean(repo);
  return s;
}

/** Warm full clones of `name`: direct, stock git with URIs, gitedge clone -j8; and the floor. */
async function warmClones(scenario: string, name: string) {
  await warm(name);
  // A warm edge has seen clients of this repository before (what `ls-refs` they send).
  for (
    const prime of [
      () => git([...URIS, "clone", "-q", "--bare", viaEdge(name), dir()]),
      () => cloneJson(["--bare", "--jobs", "8", viaEdge(name), dir()], work.path),
    ]
  ) {
    const d = dirs;
    await prime();
    await clean(`${work.path}/c${d}`);
  }
  const competitors: [string, () => Promise<unknown>][] = [
    ["direct", () => git(["clone", "-q", direct(name), dir()])],
    ["stock git, URIs", () => git([...URIS, "clone", "-q", viaEdge(name), dir()])],
    ["gitedge clone -j8", () => cloneJson(["--jobs", "8", viaEdge(name), dir()], work.path)],
  ];
  for (let r = 0; r < RUNS; r++) {
    const order = r % 2 ? [...competitors].reverse() : competitors;
    for (const [who, run] of order) {
      const d = dirs;
      record(scenario, who, await measure(run));
      await clean(`${work.path}/c${d}`);
    }
    const f = await floor(name);
    const none = { requests: 0, bytes: 0, roundTrips: 0, connections: 0, packs: 0 };
    record(scenario, "client floor", { wall: f, ...none });
    // git's own fixed costs (its processes, the checkout): the same clone with no WAN at all.
    const d = dirs;
    const local = await timed(() => git(["clone", "-q", `${origin.url}/${name}`, dir()]));
    await clean(`${work.path}/c${d}`);
    record(scenario, "direct, no WAN (loopback)", { wall: local, ...none });
  }
}

/** A never-seen copy of the big repository per run (a new name is a new repository to the edge). */
let copies = 0;
async function copyOfBig(): Promise<string> {
  const name = `copy${copies++}.git`;
  await git(["clone", "-q", "--bare", "--local", `${root}/${BIG}`, `${root}/${name}`]);
  const head = await git(["symbolic-ref", "HEAD"], { cwd: `${root}/${BIG}` });
  await git(["symbolic-ref", "HEAD", head.trim()], { cwd: `${root}/${name}` });
  // A clone does not copy the configuration: partial clones and fetches by id as forges allow
  // them (without, a `--filter` clone of a copy is a full one).
  for (
    const [key, value] of [["uploadpack.allowAnySHA1InWant", "true"], [
      "uploadpack.allowFilter",
      "true",
    ]]
  ) {
    await git(["config", key, value], { cwd: `${root}/${name}` });
  }
  return name;
}

async function cold() {
  for (let r = 0; r < RUNS; r++) {
    const d = dirs;
    record("cold", "direct", await measure(() => git(["clone", "-q", direct(BIG), dir()])));
    await clean(`${work.path}/c${d}`);
    const name = await copyOfBig();
    const e = dirs;
    record(
      "cold",
      "stock git, URIs, cold edge",
      await measure(
        () => git([...URIS, "clone", "-q", viaEdge(name), dir()]),
        () => snapshotReady(name),
      ),
    );
    await clean(`${work.path}/c${e}`);
  }
}

async function depth(scenario: string, n: number) {
  await warm(BIG);
  const burst = (url: string) =>
    Promise.all(Array.from({ length: n }, () => git(["clone", "-q", "--depth", "1", url, dir()])));
  for (let r = 0; r < RUNS; r++) {
    for (const [who, url] of [["direct", direct(BIG)], ["edge", viaEdge(BIG)]]) {
      if (who === "edge") await burst(url); // the first time: fills the response cache
      const d = dirs;
      record(scenario, who, await measure(() => burst(url)));
      for (let i = d; i < dirs; i++) await clean(`${work.path}/c${i}`);
    }
    // git's own costs for these clones (their pack work at the origin too): no WAN at all.
    const d = dirs;
    const local = await timed(() => burst(`${origin.url}/${BIG}`));
    for (let i = d; i < dirs; i++) await clean(`${work.path}/c${i}`);
    const none = { requests: 0, bytes: 0, roundTrips: 0, connections: 0, packs: 0 };
    record(scenario, "direct, no WAN (loopback)", { wall: local, ...none });
  }
}

async function fetchAfterCommits() {
  for (let r = 0; r < RUNS; r++) {
    const name = await copyOfBig();
    await warm(name);
    // Yesterday's clones: local copies (not over the link), then remotes pointed at each path.
    const mine = dir(), theirs = dir();
    for (const [d, url] of [[mine, direct(name)], [theirs, viaEdge(name)]]) {
      await git(["clone", "-q", "--local", `${root}/${name}`, d]);
      await git(["remote", "set-url", "origin", url], { cwd: d });
    }
    const branch = (await git(["symbolic-ref", "--short", "HEAD"], { cwd: `${root}/${name}` }))
      .trim();
    await addCommits(fixtureOrigin, name, { commits: 20, branch });
    await warm(name); // the edge's snapshot may refresh; the fetch is what is timed
    record("fetch", "direct", await measure(() => git(["fetch", "-q"], { cwd: mine })));
    record("fetch", "edge", await measure(() => git([...URIS, "fetch", "-q"], { cwd: theirs })));
    await clean(mine);
    await clean(theirs);
  }
}

/**
 * A tip pushed after the edge's snapshot, cloned for the first time (a CI job per commit):
 * `--depth 1`, then `--filter=blob:none` with its checkout, each of a tip of its own (3 new
 * commits), direct and through the edge, and over loopback with no WAN (git's own floor). The
 * edge's git mirror answers; the origin sends it the new commits once.
 */
async function newTip() {
  const kinds: [string, string[]][] = [
    ["newtip depth-1", ["--depth", "1"]],
    ["newtip blobless", ["--filter=blob:none"]],
  ];
  for (let r = 0; r < RUNS; r++) {
    const name = await copyOfBig();
    await warm(name);
    const branch = (await git(["symbolic-ref", "--short", "HEAD"], { cwd: `${root}/${name}` }))
      .trim();
    for (const [scenario, how] of kinds) {
      await addCommits(fixtureOrigin, name, { commits: 3, branch });
      for (
        const [who, url] of [
          ["direct", direct(name)],
          ["edge", viaEdge(name)],
          ["direct, no WAN (loopback)", `${origin.url}/${name}`],
        ]
      ) {
        const d = dirs;
        record(scenario, who, await measure(() => git(["clone", "-q", ...how, url, dir()])));
        await clean(`${work.path}/c${d}`);
      }
    }
  }
}

/** `--n` runners with the same clone of yesterday fetch after 20 new commits, all at once. */
async function fetchBurst() {
  for (let r = 0; r < RUNS; r++) {
    const name = await copyOfBig();
    await warm(name);
    // The runners' clones: local (hard-linked, not over the link), of one state, so the same
    // refs and haves; then remotes pointed at each path.
    const mine: string[] = [], theirs: string[] = [], local: string[] = [];
    for (
      const [list, url] of [
        [mine, direct(name)],
        [theirs, viaEdge(name)],
        [local, `${origin.url}/${name}`],
      ] as const
    ) {
      for (let i = 0; i < N; i++) {
        const d = dir();
        await git(["clone", "-q", "--no-checkout", "--local", `${root}/${name}`, d]);
        await git(["remote", "set-url", "origin", url], { cwd: d });
        list.push(d);
      }
    }
    const branch = (await git(["symbolic-ref", "--short", "HEAD"], { cwd: `${root}/${name}` }))
      .trim();
    await addCommits(fixtureOrigin, name, { commits: 20, branch });
    await warm(name);
    for (
      const [who, list, config] of [
        ["direct", mine, []],
        ["edge", theirs, URIS],
        ["no WAN", local, []],
      ] as const
    ) {
      const s = await measure(() =>
        Promise.all(
          list.map((d, i) => git([...(i % 2 ? config : []), "fetch", "-q"], { cwd: d })),
        )
      );
      record("fetchn", who, s);
      const packs = (await origin.stats()).commands.fetch ?? 0;
      console.log(`  fetchn ${who}: the origin computed ${packs} pack(s) for ${N} runners`);
    }
    for (const d of [...mine, ...theirs, ...local]) await clean(d);
  }
}

try {
  for (const s of SCENARIOS) {
    console.log(`\n-- ${s}`);
    if (s === "full") await warmClones("full", BIG);
    else if (s === "small") await warmClones("small", SMALL);
    else if (s === "cold") await cold();
    else if (s === "depth") await depth("depth", 1);
    else if (s === "burst") await depth("burst", N);
    else if (s === "fetch") await fetchAfterCommits();
    else if (s === "fetchn") await fetchBurst();
    else if (s === "lfs") {
      await lfsBench({
        objects: QUICK ? 10 : 50,
        bytesEach: QUICK ? 2 ** 19 : 2 * 2 ** 20,
        runs: RUNS,
        rttMs: RTT,
        mbit: MBIT,
        lanRttMs: LAN_RTT,
        lanMbit: LAN_MBIT,
      });
    } else if (s === "newtip") await newTip();
    else throw new Error(`unknown scenario ${s}`);
  }
  console.log(
    `\nOver a WAN (${RTT} ms RTT, ${MBIT} Mbit/s), ${RUNS} run(s), medians; load ${await loadavg()}`,
  );
  console.log(
    "| scenario | competitor | wall s | edge/direct | origin req | origin MB | origin packs | WAN round trips |",
  );
  console.log("|---|---|---|---|---|---|---|---|");
  for (const [scenario, byWho] of results) {
    const d = byWho.get("direct");
    const m = (xs: Sample[], k: keyof Sample) => median(xs.map((x) => x[k]));
    for (const [who, xs] of byWho) {
      const ratio = d && who !== "direct" ? `${(m(xs, "wall") / m(d, "wall")).toFixed(2)}x` : "";
      console.log(
        `| ${scenario} | ${who} | ${m(xs, "wall").toFixed(2)} | ${ratio} | ${m(xs, "requests")} | ${
          (m(xs, "bytes") / 1e6).toFixed(3)
        } | ${m(xs, "packs")} | ${m(xs, "roundTrips")} |`,
      );
    }
  }
} finally {
  await lan.stop();
  await edge.stop();
  await wan.stop();
  await origin.stop();
}
