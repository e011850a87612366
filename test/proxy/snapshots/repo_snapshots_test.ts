/**
 * `RepoSnapshots` (the Durable Object's coordination logic) with an in-memory storage and a
 * controllable builder: single-flight, durable state across instances, failures, alarms.
 * The end-to-end behaviour inside workerd with real git is in `worker_edge_test.ts`.
 */
import { assert, assertEquals, assertRejects } from "../../support/assert.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";
import type { OriginAuth, RepoRef } from "../../../src/proxy/core/repo.ts";
import {
  type Builder,
  MANIFEST_KEY,
  RepoMismatchError,
  RepoSnapshots,
} from "../../../src/proxy/snapshots/repo_snapshots.ts";
import { AlarmStorage } from "../../support/alarm_storage.ts";

/** A builder whose builds finish only when the test releases them. */
class GatedBuilder implements Builder {
  readonly calls: { auth: OriginAuth; previous: Manifest | null }[] = [];
  #release = Promise.withResolvers<void>();
  failWith: Error | null = null;

  async build(repo: RepoRef, auth: OriginAuth, previous: Manifest | null): Promise<Manifest> {
    this.calls.push({ auth, previous });
    await this.#release.promise;
    if (this.failWith) throw this.failWith;
    const n = this.calls.length;
    return {
      version: 1,
      originUrl: repo.originUrl,
      tips: { "refs/heads/main": String(n).repeat(40) },
      layers: [[{
        hash: `${n}`.repeat(40),
        key: `repos/${repo.id}/packs/${n}.pack`,
        size: 100 * n,
        objects: n,
      }]],
      builtAt: 1000 * n,
    };
  }

  release(): void {
    this.#release.resolve();
    this.#release = Promise.withResolvers<void>();
  }
}

const REPO: RepoRef = { id: "ab".repeat(16), originUrl: "http://origin.test/x.git", path: "x.git" };
const NO_AUTH: OriginAuth = { headers: {} };

function setup(storage = new AlarmStorage(), refreshMs: number | null = null) {
  const builder = new GatedBuilder();
  const backgroundErrors: unknown[] = [];
  const snapshots = new RepoSnapshots({
    storage,
    builder,
    clock: { now: () => 5_000 },
    manifestInStore: () => Promise.resolve(null),
    refreshMs,
    onBackgroundError: (_repo, error) => backgroundErrors.push(error),
  });
  return { storage, builder, snapshots, backgroundErrors };
}

/** Lets pending promise callbacks run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("concurrent warms and schedules share one build", async () => {
  const { builder, snapshots } = setup();
  assertEquals((await snapshots.status(REPO)).state, "none");
  const warms = [snapshots.warm(REPO, NO_AUTH), snapshots.warm(REPO, NO_AUTH)];
  assertEquals(await snapshots.schedule(REPO, NO_AUTH), false, "schedule joins the running build");
  await settle();
  assertEquals((await snapshots.status(REPO)).state, "building");
  builder.release();
  const results = await Promise.all(warms);
  assertEquals(builder.calls.length, 1);
  assertEquals(results.map((r) => r.started), [true, false]);
  for (const { status } of results) {
    assertEquals(status.state, "ready");
    assertEquals(status.builds, 1);
    assertEquals(status.packs, [{ hash: "1".repeat(40), bytes: 100 }]);
  }
});

Deno.test("the manifest and counters survive a new instance over the same storage", async () => {
  const first = setup();
  const warmed = first.snapshots.warm(REPO, NO_AUTH);
  await settle();
  first.builder.release();
  await warmed;
  const second = setup(first.storage);
  const manifest = await second.snapshots.manifest(REPO);
  assertEquals(manifest?.builtAt, 1000);
  const refreshed = second.snapshots.warm(REPO, NO_AUTH);
  await settle();
  second.builder.release();
  const { status } = await refreshed;
  assertEquals(status.builds, 2);
  assertEquals(
    second.builder.calls[0].previous?.builtAt,
    1000,
    "refresh starts from the stored manifest",
  );
});

Deno.test("a failed build keeps the old manifest and reports lastError", async () => {
  const { builder, snapshots, backgroundErrors } = setup();
  const warmed = snapshots.warm(REPO, NO_AUTH);
  await settle();
  builder.release();
  await warmed;
  builder.failWith = new Error("origin answered 500");
  await snapshots.schedule(REPO, NO_AUTH);
  await settle();
  builder.release();
  await settle();
  assertEquals(backgroundErrors.length, 1);
  const status = await snapshots.status(REPO);
  assertEquals(status.state, "ready");
  assertEquals(status.lastError, "origin answered 500");
  assertEquals(status.builtAt, 1000);
  const failing = snapshots.warm(REPO, NO_AUTH);
  await settle();
  builder.release();
  await assertRejects(failing, Error, /origin answered 500/);
});

Deno.test("credential-free builds arm the refresh alarm; the alarm rebuilds", async () => {
  const { storage, builder, snapshots } = setup(new AlarmStorage(), 60_000);
  const withAuth = snapshots.warm(REPO, { headers: { authorization: "Basic eDp5" } });
  await settle();
  builder.release();
  await withAuth;
  assertEquals(storage.alarm, null, "credentialed snapshots are not refreshed without a client");
  assert(!JSON.stringify([...storage.values]).includes("Basic"), "credentials are not stored");
  const open = snapshots.warm(REPO, NO_AUTH);
  await settle();
  builder.release();
  await open;
  assertEquals(storage.alarm, 65_000);
  const refresh = snapshots.refresh();
  await settle();
  builder.release();
  await refresh;
  assertEquals(builder.calls.length, 3);
  assertEquals(builder.calls[2].auth, NO_AUTH);
  assert(storage.values.has(MANIFEST_KEY));
});

Deno.test("calls naming another repository are refused", async () => {
  const { snapshots } = setup();
  await snapshots.status(REPO);
  await assertRejects(snapshots.status({ ...REPO, id: "cd".repeat(16) }), RepoMismatchError);
});

Deno.test("a schedule based on a snapshot no longer in force starts nothing", async () => {
  const { builder, snapshots } = setup();
  const warmed = snapshots.warm(REPO, NO_AUTH);
  await settle();
  builder.release();
  await warmed;
  const builtAt = (await snapshots.manifest(REPO))?.builtAt ?? null;
  assert(builtAt !== null, "a snapshot is in force");
  // A request that saw no snapshot (it raced the first build) must not start a second one.
  assertEquals(await snapshots.schedule(REPO, NO_AUTH, { builtAt: null }), false, "stale basis");
  assertEquals(builder.calls.length, 1, "no second build");
  // A request that judged the snapshot in force does start one; `rebuild` ignores the old layers.
  assertEquals(await snapshots.schedule(REPO, NO_AUTH, { builtAt, rebuild: true }), true);
  await settle();
  builder.release();
  await settle();
  assertEquals(builder.calls.length, 2, "rebuilt");
  assertEquals(builder.calls[1].previous, null, "a rebuild starts from nothing");
});
