import { completeResponseCheck, ResponseCache } from "../../src/proxy/response_cache.ts";
import { Metrics } from "../../src/proxy/metrics.ts";
import { FsPackStore } from "../../edge/deno/fs_store.ts";
import { encodePkts } from "../../src/git/pktline.ts";
import { chunked, type ChunkPlan, collect, utf8 } from "../support/streams.ts";
import { git, tempDir } from "../support/git.ts";
import { startOrigin } from "../support/origin.ts";
import { assertSameClone, makeRepo } from "../support/fixtures.ts";
import { serveLoopback } from "../support/http_server.ts";
import { createApp } from "../../src/proxy/app.ts";
import { DEFAULT_EDGE_CONFIG, type SnapshotCoordinator } from "../../src/proxy/deps.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { URI_CLONE } from "./edge_suite.ts";

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

Deno.test("ResponseCache: single-flight claims, incomplete answers stored nowhere, eviction", async () => {
  await using dir = await tempDir();
  const store = new FsPackStore(dir.path);
  const metrics = new Metrics();
  const cache = new ResponseCache();
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
  const store = new FsPackStore(`${dir.path}/store`);
  // No snapshot is ever built (schedule only counts), so every clone asks for one.
  const scheduled: string[] = [];
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
    config: { ...DEFAULT_EDGE_CONFIG, origin: origin.url },
    waitUntil: (p) => void background.push(p.catch(() => {})),
  }, { metrics });
  const server = serveLoopback((req) => app.fetch(req));
  try {
    const clone = (name: string) =>
      git([...URI_CLONE, `${server.url}/r.git`, `${dir.path}/${name}`]);
    await clone("miss");
    await Promise.all(background);
    assertEquals(scheduled.length, 1, "the miss schedules one build");
    await clone("hit");
    await Promise.all(background);
    assert(/gitedge_response_cache_total\{result="hit"\} 1\n/.test(metrics.render()), "a hit");
    // Without it, a repository whose URI clones all hit the cache never gets a snapshot.
    assertEquals(scheduled.length, 2, "the hit schedules one too");
    await git(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/direct`]);
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/hit`);
  } finally {
    await server.stop();
  }
});
