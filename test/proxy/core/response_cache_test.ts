import {
  CacheFills,
  cacheKey,
  completeResponseCheck,
  keyedByTags,
  uncacheable,
} from "../../../src/proxy/core/response_cache.ts";
import { emptyFetchArgs, type FetchArgs } from "../../../src/git/fetch_request.ts";
import { Metrics } from "../../../src/proxy/core/metrics.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { encodePkts, PktLineReader } from "../../../src/git/pktline.ts";
import { readFetchResponse } from "../../../src/git/fetch_response.ts";
import { chunked, type ChunkPlan, collect, utf8 } from "../../support/streams.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo, refsOf } from "../../support/fixtures.ts";
import { serveLoopback } from "../../support/http_server.ts";
import { createApp } from "../../../src/proxy/app.ts";
import { type SnapshotCoordinator } from "../../../src/proxy/core/deps.ts";
import { DEFAULT_EDGE_CONFIG } from "../../../src/proxy/core/config.ts";
import { assert, assertEquals } from "../../support/assert.ts";
import { URI_CLONE } from "../edge_suite.ts";

const pack = (band: number, text: string) => {
  const b = utf8(text);
  const out = new Uint8Array(b.length + 1);
  out[0] = band;
  out.set(b, 1);
  return out;
};

const complete = encodePkts([
  "shallow-info\n",
  `shallow ${"a".repeat(40)}\n`,
  "delim",
  "packfile\n",
  pack(2, "Counting objects\n"),
  pack(1, "PACK....pack bytes...."),
  "flush",
]);

async function checks(bytes: Uint8Array, max = 1 << 20): Promise<string> {
  const plans: ChunkPlan[] = ["bytewise", { seed: 7, maxChunk: 9 }, [bytes.length]];
  for (const plan of plans) {
    try {
      const out = await collect(chunked(bytes, plan).pipeThrough(completeResponseCheck(max)));
      assertEquals(out, bytes, "passes bytes through unchanged");
    } catch (err) {
      return (err as Error).message;
    }
  }
  return "ok";
}

Deno.test("cacheKey: every argument that shapes the pack is in the key, and nothing else", () => {
  const a = "a".repeat(40);
  const b = "b".repeat(40);
  const req = {
    command: "fetch",
    capabilities: ["agent=git/2.55.0", "object-format=sha1"],
    args: [],
  };
  const c = "c".repeat(40);
  const d = "d".repeat(40);
  const base: FetchArgs = { ...emptyFetchArgs(), wants: [a, b], haves: [c, d], done: true };
  const key = (more: Partial<FetchArgs>, tags = "-", r = req, repo = "r1") =>
    cacheKey(repo, r, { ...base, ...more }, tags);
  const same: [string, string][] = [
    ["wants in another order, repeated", key({ wants: [b, a, b] })],
    ["haves in another order, repeated", key({ haves: [d, c, d] })],
    [
      "another agent",
      key({}, "-", { ...req, capabilities: ["agent=other", "object-format=sha1"] }),
    ],
    ["no-progress", key({ noProgress: true })],
  ];
  for (const [what, k] of same) assertEquals(k, key({}), what);
  const different: [string, string][] = [
    ["another repository", key({}, "-", req, "r2")],
    ["another want", key({ wants: [a] })],
    ["another have", key({ haves: [c] })],
    ["no haves", key({ haves: [] })],
    ["no done (the answer begins with acknowledgments)", key({ done: false })],
    ["sha256", key({}, "-", { ...req, capabilities: ["object-format=sha256"] })],
    ["thin-pack", key({ thinPack: true })],
    ["ofs-delta", key({ ofsDelta: true })],
    ["include-tag (the same tag digest)", key({ includeTag: true })],
    ["sideband-all", key({ sidebandAll: true })],
    ["deepen 1", key({ deepen: 1 })],
    ["deepen-relative", key({ deepenRelative: true })],
    ["deepen-since", key({ deepenSince: 1_700_000_000 })],
    ["filter", key({ filter: "blob:none" })],
    ["the origin's tags", key({}, "0123abcd")],
  ];
  const keys = new Set([key({}), ...different.map(([, k]) => k)]);
  assertEquals(keys.size, different.length + 1, "each argument gives its own key");
  assertEquals(key({ deepen: 1 }) === key({ deepen: 2 }), false, "deepen 1 and 2");
  assertEquals(key({ filter: "blob:none" }) === key({ filter: "tree:0" }), false, "two filters");
});

Deno.test("uncacheable: fetches whose answer depends on a shallow boundary or on ref names", () => {
  const base: FetchArgs = { ...emptyFetchArgs(), wants: ["a".repeat(40)], done: true };
  assertEquals(uncacheable(base), null, "a plain fetch without haves");
  // The haves (and done) are in the key: the answer is the same for every client sending them.
  assertEquals(uncacheable({ ...base, haves: ["b".repeat(40)] }), null, "an incremental fetch");
  const round = { ...base, haves: ["b".repeat(40)], done: false };
  assertEquals(uncacheable(round), null, "a negotiation round (stored only if it has a pack)");
  const cases: [Partial<FetchArgs>, string][] = [
    [{ shallow: ["b".repeat(40)] }, "client is shallow"],
    [{ deepenNot: ["refs/heads/x"] }, "names refs"],
    [{ wantRefs: ["refs/heads/main"] }, "names refs"],
    [{ waitForDone: true }, "negotiation"],
    [{ wants: [] }, "no wants"],
    [{ other: ["future-argument"] }, "unknown arguments"],
  ];
  for (const [more, why] of cases) {
    assertEquals(uncacheable({ ...base, ...more }), why, JSON.stringify(more));
  }
});

Deno.test("keyedByTags: include-tag answers to clones are keyed by the origin's tags, incremental fetches not", () => {
  const clone: FetchArgs = { ...emptyFetchArgs(), wants: ["a".repeat(40)], done: true };
  assertEquals(keyedByTags({ ...clone, includeTag: true }), true, "a clone following tags");
  assertEquals(keyedByTags(clone), false, "no include-tag");
  const fetch = { ...clone, includeTag: true, haves: ["b".repeat(40)], done: false };
  assertEquals(keyedByTags(fetch), false, "git fetch wants its tags, then backfills the rest");
});

Deno.test("completeResponseCheck: only complete, successful fetch answers pass", async () => {
  assertEquals(await checks(complete), "ok");
  const sidebandAll = encodePkts([pack(1, "packfile\n"), pack(1, "PACK...."), "flush"]);
  assertEquals(await checks(sidebandAll), "ok", "sideband-all");
  const cases: [string, Uint8Array, RegExp][] = [
    ["cut short", complete.subarray(0, complete.length - 6), /cut inside|final flush/],
    ["no final flush", complete.subarray(0, complete.length - 4), /final flush/],
    ["acknowledgments only", encodePkts(["acknowledgments\n", "NAK\n", "flush"]), /no packfile/],
    ["ERR", encodePkts(["ERR upload-pack: not our ref\n", "flush"]), /ERR/],
    ["band 3", encodePkts(["packfile\n", pack(3, "fatal\n"), "flush"]), /band 3/],
    ["not pkt-lines", utf8("HTTP/1.1 500 oops\n"), /pkt-line/],
  ];
  for (const [name, bytes, why] of cases) {
    const got = await checks(bytes);
    assert(why.test(got), `${name}: ${got}`);
  }
  assert(/larger than/.test(await checks(complete, 40)), "size limit");
});

Deno.test("CacheFills: single-flight claims, incomplete answers stored nowhere, eviction", async () => {
  await using dir = await tempDir();
  const store = new FsPackStore(dir.path);
  const metrics = new Metrics();
  const cache = new CacheFills();
  const opts = { maxBytes: complete.length * 4 + 10 };

  const claim = cache.claim("cache/r/a.resp");
  assert(claim !== null, "first claim");
  assertEquals(cache.claim("cache/r/a.resp"), null, "second claim refused while the first runs");
  const waiting = cache.pending("cache/r/a.resp");
  assertEquals(await claim.fill(store, metrics, chunked(complete, { seed: 1 }), opts), true);
  assertEquals(await waiting, true, "waiters learn it was stored");
  assertEquals(cache.pending("cache/r/a.resp"), undefined, "claim released");

  const bad = cache.claim("cache/r/b.resp")!;
  const cut = complete.subarray(0, 30);
  assertEquals(await bad.fill(store, metrics, chunked(cut, [7]), opts), false, "cut answer");
  assertEquals(await store.head("cache/r/b.resp"), null, "nothing stored for it");

  for (const name of ["c", "d", "e", "f", "g"]) {
    await new Promise((r) => setTimeout(r, 5)); // distinct modification times
    assert(
      await cache.claim(`cache/r/${name}.resp`)!.fill(store, metrics, chunked(complete, [9]), opts),
    );
  }
  const left = (await store.list("cache/")).map((o) => o.key).sort();
  assertEquals(left, ["cache/r/d.resp", "cache/r/e.resp", "cache/r/f.resp", "cache/r/g.resp"]);
  assert(/gitedge_response_cache_evictions_total 2/.test(metrics.render()), metrics.render());
});

Deno.test("a response-cache hit schedules the snapshot build the fetch asks for, as the miss does", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 4 });
  await using dir = await tempDir();
  // No snapshot is ever built (schedule only counts), so every clone asks for one.
  const scheduled: string[] = [];
  await using edge = cachingEdge(origin.url, `${dir.path}/store`, scheduled);
  const clone = (name: string) => git([...URI_CLONE, `${edge.url}/r.git`, `${dir.path}/${name}`]);
  await clone("miss");
  await edge.settle();
  assertEquals(scheduled.length, 1, "the miss schedules one build");
  await clone("hit");
  await edge.settle();
  assertEquals(edge.hits(), 1, "a hit");
  // Without it, a repository whose URI clones all hit the cache never gets a snapshot.
  assertEquals(scheduled.length, 2, "the hit schedules one too");
  await git(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/direct`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/hit`);
});

/** The ids of the objects in the pack of the fetch answer to `lines` (indexed in `scratch`). */
async function answerObjects(repoUrl: string, lines: string[], scratch: string): Promise<string[]> {
  const res = await fetch(`${repoUrl}/git-upload-pack`, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
    },
    body: encodePkts(lines) as Uint8Array<ArrayBuffer>,
  });
  assertEquals(res.status, 200);
  let pack: Uint8Array | null = null;
  const reader = new PktLineReader(res.body!);
  for await (const part of readFetchResponse(reader)) {
    if (part.section === "packfile") pack = await collect(part.pack);
  }
  // The answer ends at its flush, before the body reports its end: release the response.
  await reader.cancel();
  assert(pack, "a packfile section");
  await git(["init", "-q", "--bare", scratch]);
  await git(["index-pack", "--stdin"], { cwd: scratch, stdin: pack });
  const out = await git(["cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], {
    cwd: scratch,
  });
  return out.trim().split("\n");
}

/**
 * An edge app over `origin` with no snapshot ever built: fetches are cached or forwarded. The
 * builds it is asked to schedule are only counted, in `scheduled` when given.
 */
function cachingEdge(originUrl: string, storeDir: string, scheduled: string[] = []) {
  const store = new FsPackStore(storeDir);
  const coordinator: SnapshotCoordinator = {
    manifest: () => Promise.resolve(null),
    status: () => Promise.reject(new Error("not used")),
    schedule: (repo) => {
      scheduled.push(repo.path);
      return Promise.resolve();
    },
    warm: () => Promise.reject(new Error("not used")),
  };
  const background: Promise<unknown>[] = [];
  const metrics = new Metrics();
  const app = createApp({
    store,
    coordinator,
    originFetch: (req) => fetch(req),
    clock: { now: () => Date.now() },
    signingKey: crypto.getRandomValues(new Uint8Array(32)),
    config: { ...DEFAULT_EDGE_CONFIG, origin: originUrl },
    waitUntil: (p) => void background.push(p.catch(() => {})),
  }, { metrics });
  const server = serveLoopback((req) => app.fetch(req));
  return {
    url: server.url,
    store,
    hits: () =>
      Number(/gitedge_response_cache_total\{result="hit"\} (\d+)/.exec(metrics.render())?.[1] ?? 0),
    settle: () => Promise.all(background),
    [Symbol.asyncDispose]: () => server.stop(),
  };
}

Deno.test("the response cache keeps apart answers to the same wants with another depth, filter, include-tag or tag state", async () => {
  await using origin = await startOrigin();
  const { bare } = await makeRepo(origin, "r.git", { commits: 6, tags: 1, binaryBytes: 50_000 });
  // An annotated tag on main's tip: what include-tag adds to a depth-1 answer.
  await git(["tag", "-a", "-m", "at the tip", "tip-tag", "main"], { cwd: bare });
  await using dir = await tempDir();
  await using edge = cachingEdge(origin.url, `${dir.path}/store`);
  const d = dir.path;
  /** Clones `args` directly and through the edge: the same clone; how the edge answered. */
  const both = async (name: string, args: string[]) => {
    await git(["clone", "-q", ...args, origin.repoUrl("r.git"), `${d}/${name}-direct`]);
    const [fetches, hits] = [origin.stats.commands.fetch ?? 0, edge.hits()];
    await git([...URI_CLONE, ...args, `${edge.url}/r.git`, `${d}/${name}`]);
    await edge.settle();
    await assertSameClone(`${d}/${name}-direct`, `${d}/${name}`);
    await git(["fsck", "--full"], { cwd: `${d}/${name}` });
    const shallow = (n: string) => Deno.readTextFile(`${d}/${n}/shallow`).catch(() => "");
    assertEquals(await shallow(name), await shallow(`${name}-direct`), `${name}: shallow boundary`);
    return { origin: (origin.stats.commands.fetch ?? 0) - fetches, hit: edge.hits() - hits };
  };
  // Each first: the origin computes it; the same again: a hit. Bare, so that nothing is fetched
  // lazily after the clone.
  const cases: [string, string[]][] = [
    ["depth1", ["--bare", "--depth", "1"]],
    ["depth2", ["--bare", "--depth", "2"]],
    ["blobless", ["--bare", "--filter=blob:none"]],
    ["treeless", ["--bare", "--filter=tree:0"]],
    ["full", ["--bare"]],
  ];
  for (const [name, args] of cases) {
    assertEquals(await both(name, args), { origin: 1, hit: 0 }, `${name}: a miss`);
    assertEquals(await both(`${name}-again`, args), { origin: 0, hit: 1 }, `${name}: a hit`);
  }
  assertEquals((await edge.store.list("cache/")).length, cases.length, "one entry per kind");
  // A tag added on the tip: an include-tag answer must carry it (a new key), one without it not.
  await git(["tag", "-a", "-m", "later", "late-tag", "main"], { cwd: bare });
  assertEquals(await both("depth1-late", ["--bare", "--depth", "1"]), { origin: 1, hit: 0 });
  assert((await refsOf(`${d}/depth1-late`))["refs/tags/late-tag"], "the new tag came along");
  // The same wants and depth with and without include-tag (git clone sends it even with
  // --no-tags): only the answer to include-tag carries the tag object on the tip.
  const tipTag = (await refsOf(bare))["refs/tags/tip-tag"];
  const main = (await refsOf(bare))["refs/heads/main"];
  const ask = async (includeTag: boolean) => {
    const fetches = origin.stats.commands.fetch ?? 0;
    const objects = await answerObjects(`${edge.url}/r.git`, [
      "command=fetch\n",
      "delim",
      "ofs-delta\n",
      "no-progress\n",
      ...(includeTag ? ["include-tag\n"] : []),
      "deepen 1\n",
      `want ${main}\n`,
      "done\n",
      "flush",
    ], `${d}/answer-${crypto.randomUUID()}`);
    return { tag: objects.includes(tipTag), origin: (origin.stats.commands.fetch ?? 0) - fetches };
  };
  assertEquals(await ask(false), { tag: false, origin: 1 }, "without include-tag: a miss");
  assertEquals(await ask(false), { tag: false, origin: 0 }, "without include-tag: a hit");
  assertEquals(await ask(true), { tag: true, origin: 1 }, "with include-tag: a miss");
  assertEquals(await ask(true), { tag: true, origin: 0 }, "with include-tag: a hit");
});

Deno.test("a shallow client's fetch is never cached: its answer depends on what it has", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 6 });
  const refs = await refsOf(`${origin.root}/r.git`);
  const main = refs["refs/heads/main"];
  const parent = (await git(["rev-parse", "main~1"], { cwd: `${origin.root}/r.git` })).trim();
  await using dir = await tempDir();
  await using edge = cachingEdge(origin.url, `${dir.path}/store`);
  // No have (so otherwise cacheable), but the client says it is shallow at main~1.
  const body = encodePkts([
    "command=fetch\n",
    "delim",
    "ofs-delta\n",
    `want ${main}\n`,
    `shallow ${parent}\n`,
    "deepen 1\n",
    "done\n",
    "flush",
  ]);
  for (let i = 0; i < 2; i++) {
    const res = await fetch(`${edge.url}/r.git/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
      },
      body: body as Uint8Array<ArrayBuffer>,
    });
    assertEquals(res.status, 200);
    assert((await res.text()).includes("packfile\n"), "a pack");
    await edge.settle();
  }
  assertEquals(origin.stats.commands.fetch, 2, "both went to the origin");
  assertEquals(await edge.store.list("cache/"), [], "nothing cached");
  assertEquals(edge.hits(), 0);
});
