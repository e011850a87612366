/**
 * The fleet's lease and publish logic (src/proxy/snapshots/fleet_coordinator.ts) on its own: two
 * or more nodes' `FleetBuilder`s and `FleetCoordinator`s on one filesystem store and one
 * in-memory `FleetState` whose leases expire on its own clock (Redis's semantics; the Redis
 * implementation is tested against redis-server in test/edge/deno/redis_fleet_test.ts).
 */
import { assert, assertEquals, assertRejects } from "../../support/assert.ts";
import { tempDir } from "../../support/git.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import {
  buildLease,
  FencedStore,
  FleetBuilder,
  FleetCoordinator,
  type FleetState,
  LeaseLostError,
} from "../../../src/proxy/snapshots/fleet_coordinator.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";
import { manifestKey } from "../../../src/proxy/core/store_layout.ts";
import type { OriginAuth, RepoRef } from "../../../src/proxy/core/repo.ts";
import type { Builder } from "../../../src/proxy/snapshots/repo_snapshots.ts";
import type { PackStore } from "../../../src/storage/store.ts";
import { getBytes, putBytes } from "../../../src/storage/store.ts";

/** Leases and counters in memory, expiring on `now()` (the coordinator's clock). */
export class MemoryFleetState implements FleetState {
  readonly leases = new Map<string, { token: string; until: number }>();
  readonly counters = new Map<string, number>();
  now = () => Date.now();

  #live(name: string) {
    const l = this.leases.get(name);
    if (l && l.until <= this.now()) this.leases.delete(name);
    return this.leases.get(name);
  }
  acquire(name: string, token: string, ttlMs: number): Promise<boolean> {
    if (this.#live(name)) return Promise.resolve(false);
    this.leases.set(name, { token, until: this.now() + ttlMs });
    return Promise.resolve(true);
  }
  renew(name: string, token: string, ttlMs: number): Promise<boolean> {
    const l = this.#live(name);
    if (l?.token !== token) return Promise.resolve(false);
    l.until = this.now() + ttlMs;
    return Promise.resolve(true);
  }
  release(name: string, token: string): Promise<void> {
    if (this.#live(name)?.token === token) this.leases.delete(name);
    return Promise.resolve();
  }
  holder(name: string): Promise<string | null> {
    return Promise.resolve(this.#live(name)?.token ?? null);
  }
  incr(name: string): Promise<number> {
    const n = (this.counters.get(name) ?? 0) + 1;
    this.counters.set(name, n);
    return Promise.resolve(n);
  }
  count(name: string): Promise<number> {
    return Promise.resolve(this.counters.get(name) ?? 0);
  }
}

const REPO: RepoRef = { id: "0123abcd", originUrl: "http://origin/r.git", path: "r.git" };
const NO_AUTH: OriginAuth = { headers: {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A builder that takes `ms`, then writes a manifest (built at its start) through `store`. */
class FakeBuilder implements Builder {
  builds = 0;
  gate: Promise<void> = Promise.resolve();
  constructor(readonly store: () => PackStore, readonly ms = 50) {}
  async build(repo: RepoRef): Promise<Manifest> {
    this.builds++;
    const builtAt = Date.now() + this.builds;
    await sleep(this.ms);
    await this.gate;
    const manifest: Manifest = {
      version: 1,
      originUrl: repo.originUrl,
      tips: { "refs/heads/main": "a".repeat(40) },
      layers: [],
      builtAt,
    };
    await putBytes(
      this.store(),
      manifestKey(repo.id),
      new TextEncoder().encode(JSON.stringify(manifest)),
    );
    return manifest;
  }
}

/** A node: its builder wrapped in the fleet lease, its store fenced, its coordinator. */
function node(
  shared: PackStore,
  state: FleetState,
  token: string,
  leaseMs = 300,
  onTakeover?: (lease: string) => void,
) {
  // deno-lint-ignore prefer-const -- read by the fence before it is assigned below
  let fleet: FleetBuilder;
  const store = FleetCoordinator.fence(shared, () => fleet, state, token);
  const inner = new FakeBuilder(() => store);
  fleet = new FleetBuilder(inner, shared, { state, token, leaseMs, pollMs: 10, onTakeover });
  const coordinator = new FleetCoordinator({
    store,
    builder: fleet,
    clock: { now: () => Date.now() },
    state,
  });
  return { inner, fleet, store, coordinator };
}

Deno.test("fleet: concurrent builds of one repository on three nodes run once; the others take its manifest", async () => {
  await using dir = await tempDir();
  const shared = new FsPackStore(dir.path);
  const state = new MemoryFleetState();
  const nodes = ["a", "b", "c"].map((t) => node(shared, state, t));
  const manifests = await Promise.all(nodes.map((n) => n.fleet.build(REPO, NO_AUTH, null)));
  assertEquals(nodes.map((n) => n.inner.builds).reduce((a, b) => a + b), 1, "one build");
  assertEquals(new Set(manifests.map((m) => m.builtAt)).size, 1, "one manifest for all");
  assertEquals(await state.count(`published:${REPO.id}`), 1);
  assertEquals(await state.holder(buildLease(REPO.id)), null, "the lease is released");
});

Deno.test("fleet: a publish landing between a waiter's look at the counter and its acquire is taken, not built again", async () => {
  await using dir = await tempDir();
  const shared = new FsPackStore(dir.path);
  const state = new MemoryFleetState();
  const a = node(shared, state, "a");
  const gate = Promise.withResolvers<void>();
  a.inner.gate = gate.promise;
  const first = a.fleet.build(REPO, NO_AUTH, null);
  await sleep(5);
  // b looks at the counter (0: a still builds), then a publishes and lets the lease go, and
  // only then does b's acquire reach the coordinator (the order a CI storm hit on 3 nodes).
  let delayed = false;
  const slowAcquire: FleetState = {
    acquire: async (name, token, ttl) => {
      if (!delayed) {
        delayed = true;
        gate.resolve();
        await first;
      }
      return await state.acquire(name, token, ttl);
    },
    renew: (name, token, ttl) => state.renew(name, token, ttl),
    release: (name, token) => state.release(name, token),
    holder: (name) => state.holder(name),
    incr: (name) => state.incr(name),
    count: (name) => state.count(name),
  };
  const b = node(shared, slowAcquire, "b");
  const second = await b.fleet.build(REPO, NO_AUTH, null);
  assert(delayed, "b's acquire waited for a's publish");
  assertEquals(a.inner.builds + b.inner.builds, 1, "one build");
  assertEquals(second.builtAt, (await first).builtAt, "b took a's manifest");
  assertEquals(await state.count(`published:${REPO.id}`), 1);
  assertEquals(await state.holder(buildLease(REPO.id)), null, "b let the lease go");
});

Deno.test("fleet: a holder that died (stopped renewing) is replaced once its lease expires", async () => {
  await using dir = await tempDir();
  const shared = new FsPackStore(dir.path);
  const state = new MemoryFleetState();
  await state.acquire(buildLease(REPO.id), "dead", 200);
  const takeovers: string[] = [];
  const b = node(shared, state, "b", 300, (l) => takeovers.push(l));
  const started = Date.now();
  await b.fleet.build(REPO, NO_AUTH, null);
  assert(Date.now() - started >= 150, "waited for the dead holder's lease");
  assertEquals(b.inner.builds, 1);
  assertEquals(takeovers, [buildLease(REPO.id)]);
});

Deno.test("fleet: a build outliving its lease (not renewed, taken by another) publishes nothing", async () => {
  await using dir = await tempDir();
  const shared = new FsPackStore(dir.path);
  const state = new MemoryFleetState();
  const a = node(shared, state, "a", 90);
  const gate = Promise.withResolvers<void>();
  a.inner.gate = gate.promise;
  const building = a.fleet.build(REPO, NO_AUTH, null);
  building.catch(() => {});
  await sleep(20);
  // The coordinator's clock jumps past the lease (a paused node: no renewal got through).
  state.now = () => Date.now() + 10_000;
  assert(await state.acquire(buildLease(REPO.id), "b", 60_000), "b takes the lease");
  gate.resolve();
  await assertRejects(() => building, LeaseLostError);
  assertEquals(await shared.head(manifestKey(REPO.id)), null, "no manifest published");
  assertEquals(await state.count(`published:${REPO.id}`), 0);
});

Deno.test("fleet: the fence lets a manifest through only for the lease's holder; other keys pass", async () => {
  await using dir = await tempDir();
  const shared = new FsPackStore(dir.path);
  const state = new MemoryFleetState();
  const held = new Set<string>();
  const fenced = new FencedStore(shared, (id) => Promise.resolve(held.has(id)));
  const bytes = new TextEncoder().encode("{}");
  await assertRejects(() => fenced.putBuffer(manifestKey(REPO.id), bytes), LeaseLostError);
  await assertRejects(
    () => fenced.put(manifestKey(REPO.id), new Blob([bytes]).stream()),
    LeaseLostError,
  );
  assertEquals(await shared.head(manifestKey(REPO.id)), null);
  await fenced.putBuffer(`repos/${REPO.id}/packs/x.pack`, bytes);
  held.add(REPO.id);
  await fenced.putBuffer(manifestKey(REPO.id), bytes);
  assert(await shared.head(manifestKey(REPO.id)) !== null);
  // A node whose own record says it holds the lease still asks the coordinator.
  const a = node(shared, state, "a");
  await state.acquire(buildLease(REPO.id), "b", 60_000);
  assertEquals(await a.fleet.holds(REPO.id), false);
});

Deno.test("fleet: a response-cache entry is written by the node that claims its fill; another's fill waits for it and writes nothing", async () => {
  await using dir = await tempDir();
  const shared = new FsPackStore(dir.path);
  const state = new MemoryFleetState();
  const a = node(shared, state, "a");
  const b = node(shared, state, "b");
  const key = "cache/r/entry.resp";
  const slow = new ReadableStream<Uint8Array>({
    async start(c) {
      c.enqueue(new TextEncoder().encode("A".repeat(1000)));
      await sleep(100);
      c.close();
    },
  });
  const first = a.store.put(key, slow);
  await sleep(10);
  let cancelled = false;
  const other = new ReadableStream<Uint8Array>({
    pull(c) {
      c.enqueue(new TextEncoder().encode("B".repeat(1000)));
      c.close();
    },
    cancel() {
      cancelled = true;
    },
  });
  const second = await b.store.put(key, other);
  await first;
  assertEquals(second, { size: 1000 }, "the entry the first node wrote");
  assertEquals(new TextDecoder().decode((await getBytes(shared, key))!), "A".repeat(1000));
  assert(cancelled, "the second fill's body was let go, not written");
  // Later fills of the entry do not rewrite it either.
  await b.store.putBuffer(key, new TextEncoder().encode("C".repeat(1000)));
  assertEquals(new TextDecoder().decode((await getBytes(shared, key))!), "A".repeat(1000));
});

Deno.test("fleet: a node learns another's publish through the counter, without a build of its own", async () => {
  await using dir = await tempDir();
  const shared = new FsPackStore(dir.path);
  const state = new MemoryFleetState();
  const a = node(shared, state, "a");
  const b = node(shared, state, "b");
  assertEquals(await b.coordinator.manifest(REPO), null, "b has seen no snapshot");
  const status = await a.coordinator.warm(REPO, NO_AUTH);
  assertEquals(status.state, "ready");
  const seen = await b.coordinator.manifest(REPO);
  assertEquals(seen?.builtAt, (await a.coordinator.manifest(REPO))?.builtAt);
  assertEquals(b.inner.builds, 0);
  // A publish after b read one: b takes the newer one (the counter moved), still building none.
  await sleep(5);
  assertEquals((await a.coordinator.warm(REPO, NO_AUTH, { rebuild: true })).state, "ready");
  const newer = await a.coordinator.manifest(REPO);
  assert(newer!.builtAt > seen!.builtAt, "a published a newer snapshot");
  assertEquals((await b.coordinator.manifest(REPO))?.builtAt, newer!.builtAt);
  assertEquals(b.inner.builds, 0);
});

Deno.test("fleet: the sweeper runs on one node at a time", async () => {
  await using dir = await tempDir();
  const shared = new FsPackStore(dir.path);
  const state = new MemoryFleetState();
  const [a, b] = [node(shared, state, "a"), node(shared, state, "b")];
  let running = 0;
  let most = 0;
  const sweep = async () => {
    most = Math.max(most, ++running);
    await sleep(50);
    running--;
  };
  const ran = await Promise.all([
    a.coordinator.exclusive("sweep", "a", 1000, sweep),
    b.coordinator.exclusive("sweep", "b", 1000, sweep),
  ]);
  assertEquals(ran.filter((r) => r).length, 1);
  assertEquals(most, 1);
  assertEquals(await state.holder("sweep"), null, "released after");
});
