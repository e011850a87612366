/**
 * LFS object URLs served by in-process edge apps over the harness's LFS origin: a URL handed out
 * by one process and filled by another (the Worker's isolates), single-flight fills, Range on a
 * stored object, the separate LFS host setting, and logs that never carry a credential.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { tempDir } from "../../support/git.ts";
import { makeLfsRepo, startLfsOrigin } from "../../support/lfs_origin.ts";
import { SeededRandom } from "../../support/random.ts";
import { serveLoopback } from "../../support/http_server.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { createApp } from "../../../src/proxy/app.ts";
import type { SnapshotCoordinator } from "../../../src/proxy/core/deps.ts";
import { DEFAULT_EDGE_CONFIG, type EdgeConfig } from "../../../src/proxy/core/config.ts";
import type { Logger } from "../../../src/proxy/core/log.ts";
import { Metrics } from "../../../src/proxy/core/metrics.ts";
import { lfsObjectKey } from "../../../src/proxy/lfs/lfs_urls.ts";
import { LfsState } from "../../../src/proxy/lfs/lfs_objects.ts";

const USERS = { alice: "alice-pw", bob: "bob-pw" };
const ALICE = `Basic ${btoa("alice:alice-pw")}`;
const BOB = `Basic ${btoa("bob:bob-pw")}`;

const NO_SNAPSHOTS: SnapshotCoordinator = {
  manifest: () => Promise.resolve(null),
  status: () => Promise.reject(new Error("not used")),
  schedule: () => Promise.resolve(),
  warm: () => Promise.reject(new Error("not used")),
};

/** An edge app (one "process") over `storeDir`, with its own LFS state, served on loopback. */
function edgeProcess(
  storeDir: string,
  key: Uint8Array,
  config: Partial<EdgeConfig>,
  logged: string[] = [],
  lfs?: LfsState,
) {
  const background: Promise<unknown>[] = [];
  const log: Logger = {
    enabled: () => true,
    log: (level, event, fields) => void logged.push(JSON.stringify({ level, event, fields })),
  };
  const metrics = new Metrics();
  const app = createApp({
    store: new FsPackStore(storeDir),
    coordinator: NO_SNAPSHOTS,
    originFetch: (req) => fetch(req),
    clock: { now: () => Date.now() },
    signingKey: key,
    config: { ...DEFAULT_EDGE_CONFIG, ...config },
    waitUntil: (p) => void background.push(p.catch(() => {})),
    log,
  }, { metrics, lfs });
  const server = serveLoopback((req) => app.fetch(req));
  return {
    url: server.url,
    metrics,
    settle: () => Promise.all(background),
    [Symbol.asyncDispose]: () => server.stop(),
  };
}

async function batch(
  edgeUrl: string,
  repo: string,
  objects: { oid: string; size: number }[],
  authorization?: string,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${edgeUrl}/${repo}/info/lfs/objects/batch`, {
    method: "POST",
    headers: {
      "content-type": "application/vnd.git-lfs+json",
      accept: "application/vnd.git-lfs+json",
      ...(authorization ? { authorization } : {}),
    },
    body: JSON.stringify({ operation: "download", objects }),
  });
  return { status: res.status, json: await res.json() };
}

function download(
  json: Record<string, unknown>,
  i = 0,
): { href: string; header?: Record<string, string> } {
  const objects = json.objects as {
    actions: { download: { href: string; header?: Record<string, string> } };
  }[];
  return objects[i].actions.download;
}

async function get(href: string, headers: Record<string, string> = {}) {
  const res = await fetch(href, { headers });
  return {
    status: res.status,
    headers: res.headers,
    bytes: new Uint8Array(await res.arrayBuffer()),
  };
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && a.every((x, i) => x === b[i]);
}

Deno.test("lfs: a URL handed out by one process is filled by another, which asks the origin again for the caller it was granted to", async () => {
  await using origin = await startLfsOrigin({ users: USERS, privateRepos: { "p.git": ["alice"] } });
  const bytes = new SeededRandom(21).bytes(70_000);
  const oids = await makeLfsRepo(origin, "p.git", { "a.bin": bytes }, "alice:alice-pw");
  const oid = oids["a.bin"];
  await using dir = await tempDir();
  const key = crypto.getRandomValues(new Uint8Array(32));
  await using one = edgeProcess(dir.path, key, { origin: origin.url });
  await using two = edgeProcess(dir.path, key, { origin: origin.url });
  const granted = await batch(one.url, "p.git", [{ oid, size: 70_000 }], ALICE);
  assertEquals(granted.status, 200);
  const action = download(granted.json);
  const elsewhere = action.href.replace(one.url, two.url);
  origin.resetStats();
  // Bob holding Alice's URL, in the process that has no grant: refused, nothing fetched.
  const bob = await get(elsewhere, { authorization: BOB });
  assertEquals(bob.status, 403);
  const anonymous = await get(elsewhere);
  assertEquals(anonymous.status, 403);
  assertEquals(origin.stats.batches + origin.stats.objectGets, 0);
  // Alice, with the header the action carries: the other process asks the origin and fills.
  const alice = await get(elsewhere, action.header);
  assertEquals(alice.status, 200);
  assert(same(alice.bytes, bytes), "the object's bytes");
  assertEquals(origin.stats.batches, 1);
  assertEquals(origin.stats.objectBytes, 70_000);
  await two.settle();
  // Stored once, shared: the first process serves it without the origin.
  origin.resetStats();
  const again = await get(action.href);
  assertEquals(again.status, 200);
  assert(same(again.bytes, bytes));
  assertEquals(origin.stats.batches + origin.stats.objectGets, 0);
  // Access revoked at the origin after the URL was handed out: a fill in another process is
  // refused with the origin's answer (here the object is gone for this repository).
  await origin.deleteObject("p.git", oid);
  await Deno.remove(`${dir.path}/${lfsObjectKey(oid)}`);
  const revoked = await get(action.href.replace(one.url, two.url), action.header);
  assertEquals(revoked.status, 404);
});

Deno.test("lfs: concurrent requests for one object fetch it from the origin once; Range is served from the store", async () => {
  await using origin = await startLfsOrigin({ users: USERS });
  const bytes = new SeededRandom(22).bytes(300_000);
  const oids = await makeLfsRepo(origin, "r.git", { "big.bin": bytes }, "alice:alice-pw");
  await using dir = await tempDir();
  await using edge = edgeProcess(dir.path, crypto.getRandomValues(new Uint8Array(32)), {
    origin: origin.url,
  });
  const { json } = await batch(edge.url, "r.git", [{ oid: oids["big.bin"], size: 300_000 }]);
  const { href } = download(json);
  origin.resetStats();
  const all = await Promise.all(Array.from({ length: 6 }, () => get(href)));
  for (const r of all) {
    assertEquals(r.status, 200);
    assert(same(r.bytes, bytes));
  }
  assertEquals(origin.stats.objectGets, 1, "single-flight");
  assertEquals(origin.stats.objectBytes, 300_000);
  await edge.settle();
  const ranged = await get(href, { range: "bytes=1000-1999" });
  assertEquals(ranged.status, 206);
  assertEquals(ranged.headers.get("content-range"), "bytes 1000-1999/300000");
  assert(same(ranged.bytes, bytes.subarray(1000, 2000)));
  assertEquals(origin.stats.objectGets, 1);
  assert(/gitedge_lfs_objects_total\{result="hit"\} [1-9]/.test(edge.metrics.render()));
  // An origin granting the object under another size: refused, stored or not.
  origin.anySize.on = true;
  const other = await batch(edge.url, "r.git", [{ oid: oids["big.bin"], size: 299_999 }]);
  const wrong = await get(download(other.json).href);
  assertEquals(wrong.status, 502, "stored, and the size disagrees");
  await Deno.remove(`${dir.path}/${lfsObjectKey(oids["big.bin"])}`);
  const missing = await get(download(other.json).href);
  assertEquals(missing.status, 502, "not stored, and the origin's length disagrees");
  await edge.settle();
  assert(
    !await Deno.stat(`${dir.path}/${lfsObjectKey(oids["big.bin"])}`).then(() => true, () => false),
  );
});

Deno.test("lfs: lfsOrigin sends the LFS API to a host apart from the Git origin; no log line holds a credential", async () => {
  await using origin = await startLfsOrigin({ users: USERS, privateRepos: { "p.git": ["alice"] } });
  const bytes = new SeededRandom(23).bytes(10_000);
  const oids = await makeLfsRepo(origin, "p.git", { "a.bin": bytes }, "alice:alice-pw");
  await using dir = await tempDir();
  const logged: string[] = [];
  await using edge = edgeProcess(
    dir.path,
    crypto.getRandomValues(new Uint8Array(32)),
    { origin: "http://127.0.0.1:9", lfsOrigin: origin.url },
    logged,
  );
  const { status, json } = await batch(
    edge.url,
    "p.git",
    [{ oid: oids["a.bin"], size: 10_000 }],
    ALICE,
  );
  assertEquals(status, 200);
  const got = await get(download(json).href);
  assert(same(got.bytes, bytes));
  await edge.settle();
  assert(logged.length > 0, "the request log wrote");
  const wrote = (route: string, action: string) =>
    logged.some((l) => l.includes(`"route":"${route}"`) && l.includes(`"action":"${action}"`));
  assert(wrote("lfs", "lfs-rewrote"), `the batch logged: ${logged.join("\n")}`);
  assert(wrote("lfs-object", "lfs-miss"), `the fill logged: ${logged.join("\n")}`);
  for (const line of logged) {
    assert(!line.includes("alice-pw") && !line.includes(ALICE.slice(6)), line);
    assert(!line.includes("/_lfs/"), `the origin's href is logged: ${line}`);
  }
});

Deno.test("lfs: an origin download whose content is not its oid breaks off at the client and is not stored", async () => {
  await using origin = await startLfsOrigin({ users: USERS });
  const bytes = new SeededRandom(24).bytes(50_000);
  const oids = await makeLfsRepo(origin, "r.git", { "a.bin": bytes }, "alice:alice-pw");
  const oid = oids["a.bin"];
  await using dir = await tempDir();
  await using edge = edgeProcess(dir.path, crypto.getRandomValues(new Uint8Array(32)), {
    origin: origin.url,
  });
  const { json } = await batch(edge.url, "r.git", [{ oid, size: 50_000 }]);
  const { href } = download(json);
  origin.corrupt.add(oid);
  const res = await fetch(href);
  assertEquals(res.status, 200, "the answer starts before the content is checked");
  const read = await res.arrayBuffer().then(() => "whole", () => "broken off");
  assertEquals(read, "broken off");
  await edge.settle();
  const stored = await Deno.stat(`${dir.path}/${lfsObjectKey(oid)}`).then(() => true, () => false);
  assert(!stored, "a corrupt object is not stored");
  origin.corrupt.clear();
  const good = await get(href);
  assert(same(good.bytes, bytes));
  await edge.settle();
  assert(await Deno.stat(`${dir.path}/${lfsObjectKey(oid)}`).then(() => true, () => false));
});

Deno.test("lfs: with claims (the Worker's isolates), a process missing an object another is filling waits for it", async () => {
  await using origin = await startLfsOrigin({ users: USERS });
  const bytes = new SeededRandom(25).bytes(80_000);
  const oids = await makeLfsRepo(origin, "r.git", { "a.bin": bytes }, "alice:alice-pw");
  const oid = oids["a.bin"];
  await using dir = await tempDir();
  const key = crypto.getRandomValues(new Uint8Array(32));
  const config = { origin: origin.url };
  await using one = edgeProcess(dir.path, key, config, [], new LfsState(undefined, true));
  await using two = edgeProcess(dir.path, key, config, [], new LfsState(undefined, true));
  const { json } = await batch(one.url, "r.git", [{ oid, size: 80_000 }]);
  const { href } = download(json);
  origin.resetStats();
  origin.delay.ms = 600;
  const first = get(href);
  await new Promise((resolve) => setTimeout(resolve, 250));
  const second = get(href.replace(one.url, two.url));
  for (const r of await Promise.all([first, second])) {
    assertEquals(r.status, 200);
    assert(same(r.bytes, bytes));
  }
  assertEquals(origin.stats.objectGets, 1, "one origin download for both processes");
  await one.settle();
  await two.settle();
  assertEquals(await Array.fromAsync(Deno.readDir(`${dir.path}/lfs/claims`)), [], "claim released");
});
