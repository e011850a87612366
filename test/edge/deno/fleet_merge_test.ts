/**
 * The fleet's shared registry, pins and sweeps: three Deno edges on one S3 store (`s3rver`, an S3
 * emulator from npm) and one `redis-server`, behind a round-robin front. Counts from every node
 * add up without a lost update, a pin set on one node holds against another node's sweep, every
 * sweep (after a build, after a warm, after requests) runs under the fleet's one sweep lease.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { startFleet } from "../../support/fleet.ts";
import { redisMissing } from "../../support/redis_server.ts";
import { skipped } from "../../support/skips.ts";
import { ForwardingStore } from "../../support/forwarding_store.ts";
import { encodePkts } from "../../../src/git/pktline.ts";
import { repoId } from "../../../src/proxy/core/repo.ts";
import { RedisFleetState } from "../../../edge/deno/redis_fleet.ts";
import type { Overview } from "../../../src/proxy/ops/operator_page.ts";
import type { PackStore } from "../../../src/storage/store.ts";

const LEAKY = { sanitizeResources: false, sanitizeOps: false };
const TOKEN = "fleet-admin-token";
const SMALL = { commits: 6, branches: 1, tags: 1, binaryBytes: 40_000, deltaFileRevisions: 2 };
const BIG = { commits: 4, branches: 1, tags: 0, binaryBytes: 300_000, deltaFileRevisions: 2 };

const missing = await redisMissing();
if (missing) skipped("fleet_merge_test", "redis-server is not installed (.ci/run installs it)");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * The emulator's object times are whole seconds: a snapshot built within the same second as
 * another would tie for the newest (the one eviction spares as just built).
 */
const STORE_TIME_GRAIN_MS = 1100;

async function until(check: () => Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  await withinDeadline(
    (async () => {
      while (!await check()) await sleep(50);
    })(),
    what,
    ms,
  );
}

async function repos(url: string): Promise<Overview> {
  const res = await fetch(`${url}/_edge/repos`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assertEquals(res.status, 200);
  return await res.json();
}

async function warm(url: string, path: string): Promise<string> {
  const res = await fetch(`${url}/_edge/warm/${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  const body = await res.json();
  assertEquals(res.status, 200, JSON.stringify(body));
  return body.snapshot.state;
}

/** A clone-style protocol v2 fetch of `wants` asking for pack URIs; the URIs answered. */
async function fetchUris(url: string, path: string, wants: string[]): Promise<string[]> {
  const res = await fetch(`${url}/${path}/git-upload-pack`, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
    },
    body: encodePkts([
      "command=fetch\n",
      "delim",
      ...wants.map((w) => `want ${w}\n`),
      "packfile-uris http\n",
      "done\n",
      "flush",
    ]) as Uint8Array<ArrayBuffer>,
  });
  assertEquals(res.status, 200);
  const text = new TextDecoder("latin1").decode(await res.arrayBuffer());
  return [...text.matchAll(/[0-9a-f]{40} (http:\/\/\S+)/g)].map((m) => m[1]);
}

Deno.test({
  name:
    "fleet registry: 24 concurrent clones over 3 nodes -> the fleet's fetch count is 24 exactly; a repository first seen on one node is listed by every node",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    const REPO = "team/count.git";
    await makeRepo(origin, REPO, SMALL);
    await makeRepo(origin, "solo/one.git", { ...SMALL, seed: 7 });
    await using fleet = await startFleet(3, { origin: origin.url, chunks: 2, adminToken: TOKEN });
    const CLONES = 24;
    await withinDeadline(
      Promise.all(
        Array.from({ length: CLONES }, (_, i) =>
          git([
            "-c",
            "protocol.version=2",
            "clone",
            "-q",
            "--bare",
            `${fleet.front.url}/${REPO}`,
            `${dir.path}/c${i}`,
          ])),
      ),
      "the clones",
      120_000,
    );
    // One repository seen by node 2 alone: node 0 lists it (once node 2 registered it).
    await git(["clone", "-q", "--bare", `${fleet.nodes[2]!.url}/solo/one.git`, `${dir.path}/s`]);
    await until(
      async () =>
        (await repos(fleet.nodes[0]!.url)).repositories.some((r) => r.path === "solo/one.git"),
      "node 0 listing the repository node 2 registered",
    );
    await withinDeadline(fleet.idle(), "the builds");
    // Every node stops at once, each adding what it counted since its last flush.
    await Promise.all(fleet.nodes.map((n) => n!.stop()));
    fleet.nodes.fill(null);
    const fresh = await fleet.startNode(3);
    const listed = await repos(fresh.url);
    const count = listed.repositories.find((r) => r.path === REPO);
    assertEquals(count?.fetches, CLONES, "every clone counted once, fleet-wide");
    const solo = listed.repositories.find((r) => r.path === "solo/one.git");
    assertEquals(solo?.fetches, 1);
    assert(solo?.lastClonedAt !== null, "its last clone's time");
  },
});

/** A store whose registry writes stall while `slow` is set (one node's store requests slow). */
class SlowRegistryStore extends ForwardingStore {
  slowMs = 0;
  override async put(key: string, body: ReadableStream<Uint8Array>) {
    if (this.slowMs > 0 && key.startsWith("registry/")) await sleep(this.slowMs);
    return await this.inner.put(key, body);
  }
}

Deno.test({
  name:
    "fleet pins: a snapshot whose URLs node 0 handed out is spared by node 1's sweep under a tight cap, though node 0's store writes are slow; the URLs serve",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using origin = await startOrigin();
    const X = "pin/x.git";
    const Y = "pin/y.git";
    const x = await makeRepo(origin, X, { ...BIG, seed: 11 });
    await makeRepo(origin, Y, { ...BIG, seed: 12 });
    let slow: SlowRegistryStore | undefined;
    await using fleet = await startFleet(2, {
      origin: origin.url,
      chunks: 1,
      adminToken: TOKEN,
      storeMaxBytes: 450_000,
      wrapStore: (i: number, store: PackStore) =>
        i === 0 ? (slow = new SlowRegistryStore(store)) : store,
    });
    const shared = fleet.s3.store(fleet.store.slice("s3://gitedge/".length));
    const packsOf = async (path: string) =>
      await shared.list(`repos/${repoId(`${origin.url}/${path}`)}/packs/`);
    assertEquals(await warm(fleet.nodes[0]!.url, X), "ready");
    await withinDeadline(fleet.idle(), "X's build and sweep");
    const xBytes = (await packsOf(X)).reduce((n, o) => n + o.size, 0);
    assert(xBytes > 225_000 && xBytes < 450_000, `X's packs: ${xBytes} bytes (one fits the cap)`);

    // Node 0 hands out X's pack URLs; its own store writes (the registry's) now stall.
    slow!.slowMs = 8000;
    const uris = await fetchUris(fleet.nodes[0]!.url, X, Object.values(x.refs));
    assert(uris.length > 0, "pack URIs handed out");
    await sleep(STORE_TIME_GRAIN_MS); // Y's objects are newer than X's by the store's clock
    // Node 1 builds Y: the store goes over its cap, and node 1's sweep must spare X.
    assertEquals(await warm(fleet.nodes[1]!.url, Y), "ready");
    await withinDeadline(fleet.nodes[1]!.idle(), "Y's build and sweep");
    assert((await packsOf(X)).length > 0, "X's packs are still in the store");
    for (const uri of uris) {
      const res = await fetch(uri);
      assertEquals(res.status, 200, uri);
      assert((await res.arrayBuffer()).byteLength > 0);
    }
    slow!.slowMs = 0;
  },
});

Deno.test({
  name:
    "fleet sweeps: while another holds the sweep lease, neither a warm's sweep nor the sweep after requests evicts anything; with the lease free, they do",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using origin = await startOrigin();
    const X = "sweep/x.git";
    const Y = "sweep/y.git";
    await makeRepo(origin, X, { ...BIG, seed: 21 });
    await makeRepo(origin, Y, { ...BIG, seed: 22 });
    await using fleet = await startFleet(2, {
      origin: origin.url,
      chunks: 1,
      adminToken: TOKEN,
      storeMaxBytes: 450_000,
    });
    await using state = new RedisFleetState({ url: fleet.redis.url, namespace: fleet.store });
    await state.connect();
    assert(await state.acquire("sweep", "elsewhere", 120_000), "the test holds the sweep lease");
    const shared = fleet.s3.store(fleet.store.slice("s3://gitedge/".length));
    const packsOf = async (path: string) =>
      (await shared.list(`repos/${repoId(`${origin.url}/${path}`)}/packs/`)).length;
    assertEquals(await warm(fleet.nodes[0]!.url, X), "ready");
    await withinDeadline(fleet.idle(), "X's build");
    await sleep(STORE_TIME_GRAIN_MS); // Y's objects are newer than X's by the store's clock
    assertEquals(await warm(fleet.nodes[0]!.url, Y), "ready");
    await withinDeadline(fleet.idle(), "Y's build and the sweeps it starts");
    // More requests (the periodic sweep runs after requests).
    for (const n of fleet.nodes) await (await fetch(`${n!.url}/_edge/metrics`)).body?.cancel();
    await withinDeadline(fleet.idle(), "sweeps after requests");
    assert(await packsOf(X) > 0 && await packsOf(Y) > 0, "nothing evicted: another sweeps");

    await state.release("sweep", "elsewhere");
    assertEquals(await warm(fleet.nodes[1]!.url, Y), "ready");
    await withinDeadline(fleet.idle(), "the warm's sweep");
    assertEquals(await packsOf(X), 0, "X evicted by the sweep with the lease");
    assert(await packsOf(Y) > 0, "Y kept");
  },
});

Deno.test({
  name:
    "fleet clocks 8 s apart: a pack URL signed by the node behind, still valid by its clock, is served by the node ahead; past the leeway it is refused",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using origin = await startOrigin();
    const X = "clock/x.git";
    const x = await makeRepo(origin, X, { ...SMALL, seed: 31 });
    const skew = [0, 0];
    await using fleet = await startFleet(2, {
      origin: origin.url,
      chunks: 1,
      adminToken: TOKEN,
      clockSkewMs: skew,
    });
    assertEquals(await warm(fleet.nodes[0]!.url, X), "ready");
    const [uri] = await fetchUris(fleet.nodes[0]!.url, X, Object.values(x.refs));
    assert(uri, "a pack URI");
    const exp = Number(new URL(uri).searchParams.get("exp")) * 1000;
    const at = (i: number, wall: number) => skew[i] = wall - Date.now();
    const onNode1 = async () => {
      const u = new URL(uri);
      const res = await fetch(`${fleet.nodes[1]!.url}${u.pathname}${u.search}`);
      await res.body?.cancel();
      return res.status;
    };
    // Node 0 (the signer) reads 3 s before the expiry, node 1 8 s later: 5 s past it.
    at(0, exp - 3000);
    at(1, exp + 5000);
    assertEquals(await onNode1(), 200, "valid by the signer's clock: served by node 1");
    at(1, exp + 60_000);
    assertEquals(await onNode1(), 403, "a minute past its expiry: refused");
  },
});

Deno.test({
  name:
    "fleet pins: while another node evicts a snapshot, a fetch hands out none of its URLs and passes through (the clone equals a direct one); after, URLs again",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    const X = "evicting/x.git";
    const x = await makeRepo(origin, X, { ...SMALL, seed: 41 });
    await git(["clone", "-q", "--mirror", `${origin.url}/${X}`, `${dir.path}/direct`]);
    await using fleet = await startFleet(2, { origin: origin.url, chunks: 1, adminToken: TOKEN });
    assertEquals(await warm(fleet.nodes[0]!.url, X), "ready");
    assert((await fetchUris(fleet.nodes[0]!.url, X, Object.values(x.refs))).length > 0);
    // Another node (the sweeper) marks the snapshot as being evicted: the pins have lapsed.
    await using sweeper = new RedisFleetState({ url: fleet.redis.url, namespace: fleet.store });
    await sweeper.connect();
    const id = repoId(`${origin.url}/${X}`);
    assert(await sweeper.beginEviction(id, Date.now() + 30 * 86_400_000, 60_000), "marked");
    assertEquals(await fetchUris(fleet.nodes[0]!.url, X, Object.values(x.refs)), [], "no URL");
    await git([
      "-c",
      "fetch.uriProtocols=http",
      "clone",
      "-q",
      "--mirror",
      `${fleet.nodes[1]!.url}/${X}`,
      `${dir.path}/during`,
    ]);
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/during`);
    await sweeper.endEviction(id);
    assert((await fetchUris(fleet.nodes[0]!.url, X, Object.values(x.refs))).length > 0, "again");
  },
});

Deno.test({
  name:
    "fleet store full: when the sweeper finds the store full (what is left pinned or fresh), another node's build waits too (507), then resumes once it fits",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using origin = await startOrigin();
    const [X, Y, Z] = ["full/x.git", "full/y.git", "full/z.git"];
    const x = await makeRepo(origin, X, { ...BIG, seed: 51 });
    await makeRepo(origin, Y, { ...BIG, seed: 52 });
    await makeRepo(origin, Z, { ...BIG, seed: 53 });
    const skew = [0, 0];
    await using fleet = await startFleet(2, {
      origin: origin.url,
      chunks: 1,
      adminToken: TOKEN,
      storeMaxBytes: 450_000,
      clockSkewMs: skew,
    });
    const node0 = fleet.nodes[0]!.url;
    assertEquals(await warm(node0, X), "ready");
    await withinDeadline(fleet.idle(), "X's build and sweep");
    assert((await fetchUris(node0, X, Object.values(x.refs))).length > 0, "X pinned");
    await sleep(STORE_TIME_GRAIN_MS); // Y's objects are newer than X's by the store's clock
    assertEquals(await warm(node0, Y), "ready");
    await withinDeadline(fleet.idle(), "Y's build and the sweep that finds the store full");
    // Node 1 never swept: the sweeper's word stops its build.
    const res = await fetch(`${fleet.nodes[1]!.url}/_edge/warm/${Z}`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const body = await res.text();
    assertEquals(res.status, 507, body);
    const shared = fleet.s3.store(fleet.store.slice("s3://gitedge/".length));
    const zId = repoId(`${origin.url}/${Z}`);
    assertEquals((await shared.list(`repos/${zId}/packs/`)).length, 0, "nothing of Z built");

    // Two hours on, X's pin has lapsed: the next sweep (after a request) evicts it, and says so.
    skew[0] = skew[1] = 2 * 3_600_000;
    await (await fetch(`${node0}/_edge/metrics`)).body?.cancel();
    await withinDeadline(fleet.idle(), "the sweep after the request");
    assertEquals(await warm(fleet.nodes[1]!.url, Z), "ready", "builds resume on node 1");
  },
});
