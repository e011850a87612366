/**
 * The fleet's repository registry in Redis (`RedisFleetState` as a `SharedRegistry`, and the
 * `RepoRegistry` of each node on it) against Debian's redis-server: concurrent merges lose no
 * count and move no time back; pins and evictions of different nodes exclude each other; a
 * coordinator gone for a while loses nothing a node counted meanwhile.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { redisMissing, startRedis } from "../../support/redis_server.ts";
import { skipped } from "../../support/skips.ts";
import { tempDir } from "../../support/git.ts";
import { RedisFleetState } from "../../../edge/deno/redis_fleet.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import {
  type Counts,
  FLEET_CLOCK_SLACK_MS,
  type RepoRecord,
  RepoRegistry,
  type SharedRegistry,
} from "../../../src/proxy/ops/repo_registry.ts";
import type { RepoRef } from "../../../src/proxy/core/repo.ts";

const missing = await redisMissing();
if (missing) skipped("redis_registry_test", "redis-server is not installed (.ci/run installs it)");
const LEAKY = { sanitizeResources: false, sanitizeOps: false };

const REPO: RepoRef = { id: "c".repeat(32), path: "x/y.git", originUrl: "http://o/x/y.git" };

function record(over: Partial<RepoRecord> = {}): RepoRecord {
  return {
    ...REPO,
    firstSeenAt: 1000,
    lastClonedAt: null,
    pinnedUntil: 0,
    fetches: 0,
    fromSnapshot: 0,
    answered: 0,
    cached: 0,
    packBytes: 0,
    builtAt: null,
    packs: 0,
    snapshotBytes: 0,
    evictedAt: null,
    evictions: 0,
    ...over,
  };
}
const counts = (fetches: number, packBytes = 0) => ({
  fetches,
  fromSnapshot: 0,
  answered: 0,
  cached: 0,
  packBytes,
});

Deno.test({
  name:
    "redis registry: 3 nodes x 50 concurrent merges -> every count added; times at their latest, first sight at its earliest, the newest snapshot kept",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using redis = await startRedis();
    const nodes = await Promise.all([0, 1, 2].map(async () => {
      const s = new RedisFleetState({ url: redis.url, namespace: "t" });
      assert(await s.connect());
      return s;
    }));
    try {
      const created = await Promise.all(
        nodes.flatMap((node, n) =>
          Array.from({ length: 50 }, (_, i) =>
            node.merge(
              record({
                firstSeenAt: 1000 + n,
                lastClonedAt: 5000 + i * 3 + n,
                builtAt: i === 7 ? 9000 + n : null,
                packs: n + 1,
                snapshotBytes: 100 * (n + 1),
              }),
              counts(1, 10),
            ))
        ),
      );
      assertEquals(created.filter((c) => c?.created).length, 1, "one merge created the record");
      // An older view merged late moves nothing back.
      await nodes[0].merge(record({ firstSeenAt: 4000, lastClonedAt: 10, builtAt: 1 }), counts(0));
      const [r] = await nodes[1].list();
      assertEquals(r.fetches, 150);
      assertEquals(r.packBytes, 1500);
      assertEquals(r.lastClonedAt, 5000 + 49 * 3 + 2);
      assertEquals(r.firstSeenAt, 1000);
      assertEquals([r.builtAt, r.packs, r.snapshotBytes], [9002, 3, 300]);
      assertEquals([r.path, r.originUrl], [REPO.path, REPO.originUrl]);
    } finally {
      for (const n of nodes) await n.close();
    }
  },
});

Deno.test({
  name:
    "redis registry: a pin of one node spares the snapshot from another node's eviction; an eviction under way, or begun since the lookup, refuses the pin",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using redis = await startRedis();
    await using dir = await tempDir();
    await using sa = new RedisFleetState({ url: redis.url, namespace: "t" });
    await using sb = new RedisFleetState({ url: redis.url, namespace: "t" });
    assert(await sa.connect() && await sb.connect());
    const store = new FsPackStore(dir.path);
    let now = 100_000;
    const clock = { now: () => now };
    const a = new RepoRegistry(store, clock, sa);
    const b = new RepoRegistry(store, clock, sb);

    const lookup = await a.epochOf(REPO.id);
    assert(a.pin(REPO, 200_000, lookup.local));
    assert(await a.pinFleet(REPO, 200_000, lookup), "pinned fleet-wide");
    assertEquals(await b.beginEviction(REPO.id, 150_000), false, "a's pin spares it on b");
    // A node whose clock runs ahead by less than the slack still spares it.
    assertEquals(await b.beginEviction(REPO.id, 200_000 + FLEET_CLOCK_SLACK_MS - 1), false);
    const before = await a.epochOf(REPO.id);
    assert(await b.beginEviction(REPO.id, 200_000 + FLEET_CLOCK_SLACK_MS), "the pin lapsed");
    now = 150_000;
    assertEquals(await a.pinFleet(REPO, 400_000, before), false, "being evicted on b");
    const during = await a.epochOf(REPO.id);
    assertEquals(await a.pinFleet(REPO, 400_000, during), false, "looked up during b's eviction");
    await b.endEviction(null, REPO.id, true);
    assertEquals(await a.pinFleet(REPO, 400_000, before), false, "evicted since the lookup");
    assert(await a.pinFleet(REPO, 400_000, await a.epochOf(REPO.id)), "a fresh lookup pins");
    assertEquals(await b.beginEviction(REPO.id, 300_000), false, "pinned again");
  },
});

Deno.test({
  name:
    "redis registry: the coordinator gone for a while -> a node keeps its counts and lists the store's copies; once it is back, the counts are added, none lost",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using redis = await startRedis();
    await using dir = await tempDir();
    await using state = new RedisFleetState({ url: redis.url, namespace: "t", timeoutMs: 500 });
    assert(await state.connect());
    const store = new FsPackStore(dir.path);
    const clock = { now: () => 1000 };
    const node = new RepoRegistry(store, clock, state);
    node.noteFetch(REPO, "answered", true);
    node.noteFetch(REPO, "passthrough", true);
    await node.flush(true);
    assertEquals((await state.list())[0].fetches, 2);

    await redis.kill();
    node.noteFetch(REPO, "answered", true);
    let failed = false;
    await node.flush(true).catch(() => failed = true);
    assert(failed, "the flush failed");
    const listed = await node.list();
    assertEquals(
      listed.map((r) => [r.path, r.fetches]),
      [[REPO.path, 3]],
      "the store's copy + news",
    );

    await redis.restart();
    for (let i = 0; i < 100 && !await state.connect(); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    node.noteFetch(REPO, "answered", true);
    await node.flush(true);
    // The coordinator restarted empty: the store's copy (2) and what was counted since (2).
    const [back] = await state.list();
    assertEquals(back.fetches, 4, "nothing lost");
  },
});

/** The registry in Redis, whose first `lose` merges are applied but their answers lost. */
class LostAnswers implements SharedRegistry {
  constructor(readonly inner: RedisFleetState, public lose: number) {}
  async merge(r: RepoRecord, d: Counts, batch?: string) {
    const out = await this.inner.merge(r, d, batch);
    if (this.lose-- > 0) throw new Error("the coordinator did not answer in time");
    return out;
  }
  list = () => this.inner.list();
  epoch = (id: string) => this.inner.epoch(id);
  pin = (id: string, until: number, epoch: number | null) => this.inner.pin(id, until, epoch);
  beginEviction = (id: string, now: number, ttl: number) => this.inner.beginEviction(id, now, ttl);
  endEviction = (id: string) => this.inner.endEviction(id);
}

Deno.test({
  name:
    "redis registry: counts whose answer was lost (a timeout after Redis applied them) are sent again under their batch and added once",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using redis = await startRedis();
    await using dir = await tempDir();
    await using state = new RedisFleetState({ url: redis.url, namespace: "t" });
    assert(await state.connect());
    const twice = await state.merge(record(), counts(5), "one-batch");
    await state.merge(record(), counts(5), "one-batch");
    assertEquals(twice?.record.fetches, 5, "a batch's counts added once");

    const lossy = new LostAnswers(state, 1);
    const node = new RepoRegistry(new FsPackStore(dir.path), { now: () => 1000 }, lossy);
    const other = { ...REPO, id: "d".repeat(32), path: "x/z.git" };
    node.noteFetch(other, "answered", true);
    node.noteFetch(other, "answered", true);
    let failed = false;
    await node.flush(true).catch(() => failed = true);
    assert(failed, "the answer was lost");
    node.noteFetch(other, "answered", true);
    await node.flush(true);
    const r = (await state.list()).find((x) => x.id === other.id);
    assertEquals(r?.fetches, 3, "each fetch counted once");
  },
});
