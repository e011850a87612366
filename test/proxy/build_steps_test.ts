/**
 * Builds carried across invocations (`stepByAlarm`, as the Worker's Durable Object runs them) with
 * the real snapshot builder, a real origin and the filesystem store: a build "killed" between any
 * two steps (a new instance over the same storage, as a restarted Durable Object) or inside a step
 * (the store fails mid-write) resumes and publishes a snapshot equal to the origin; nothing is
 * published before the last step; a build that keeps failing is abandoned and leaves nothing.
 */
import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { repoId, type RepoRef } from "../../src/proxy/core/repo.ts";
import { SnapshotBuilder } from "../../src/proxy/snapshots/snapshot.ts";
import { manifestPacks, readManifest } from "../../src/proxy/core/manifest.ts";
import {
  BUILD_KEY,
  MAX_STEP_ATTEMPTS,
  type PendingBuild,
  RepoSnapshots,
} from "../../src/proxy/snapshots/repo_snapshots.ts";
import { FsPackStore } from "../../edge/deno/fs_store.ts";
import { ForwardingStore } from "../support/forwarding_store.ts";
import { git, tempDir } from "../support/git.ts";
import { startOrigin } from "../support/origin.ts";
import { makeRepo } from "../support/fixtures.ts";
import { AlarmStorage } from "../support/alarm_storage.ts";
import { withinDeadline } from "../support/deadline.ts";

const noAuth = { headers: {} };

/** A store whose writes fail while `failPuts` > 0 (a step dying half-way). */
class FlakyStore extends ForwardingStore {
  failPuts = 0;
  override async put(key: string, body: ReadableStream<Uint8Array>) {
    if (this.failPuts > 0) {
      this.failPuts--;
      await body.cancel();
      throw new Error(`injected failure writing ${key}`);
    }
    return await this.inner.put(key, body);
  }
}

async function setup() {
  const origin = await startOrigin();
  const dir = await tempDir();
  await makeRepo(origin, "r.git", { commits: 10, binaryBytes: 900_000 });
  const store = new FlakyStore(new FsPackStore(`${dir.path}/store`));
  const originUrl = origin.repoUrl("r.git");
  const repo: RepoRef = { id: repoId(originUrl), originUrl, path: "r.git" };
  const storage = new AlarmStorage();
  /** A builder over `store` in 3 packs of 64 KiB segments, as each instance gets. */
  const newBuilder = () =>
    new SnapshotBuilder({
      store,
      originFetch: (r) => fetch(r),
      clock: { now: () => Date.now() },
      chunks: 3,
      minSplitBytes: 1,
      segmentBytes: 64 * 1024,
    });
  const instance = () =>
    new RepoSnapshots({
      storage,
      builder: newBuilder(),
      clock: { now: () => Date.now() },
      manifestInStore: (r) => readManifest(store, r),
      refreshMs: null,
      onBackgroundError: () => {},
      stepByAlarm: true,
    });
  return { origin, dir, store, repo, storage, instance, newBuilder };
}

/** Every object id in `keys` (each pack indexed on its own: self-contained). */
async function objectsOf(root: string, keys: string[], scratch: string): Promise<string[]> {
  const ids = new Set<string>();
  await git(["init", "-q", "--bare", scratch]);
  for (const key of keys) {
    await git(["index-pack", "-o", `${scratch}/x.idx`, `${root}/${key}`], { cwd: scratch });
    const listing = await git(["show-index"], { stdin: await Deno.readFile(`${scratch}/x.idx`) });
    for (const line of listing.trim().split("\n")) ids.add(line.split(" ")[1]);
    await Deno.remove(`${scratch}/x.idx`);
  }
  return [...ids].sort();
}

async function originObjects(bare: string): Promise<string[]> {
  const out = await git(["cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], {
    cwd: bare,
  });
  return out.trim().split("\n").sort();
}

Deno.test("a build killed between any two steps, or inside one, resumes and publishes", async () => {
  const { origin, dir, store, repo, storage, instance } = await setup();
  await using _o = origin;
  await using _d = dir;
  // First invocation: tips and the pack (with the caller's credentials); the rest is alarms.
  const first = instance();
  first.schedule(repo, noAuth);
  while ((await storage.get<PendingBuild>(BUILD_KEY)) === undefined) {
    await new Promise((r) => setTimeout(r, 10));
  }
  assert(storage.alarm !== null, "the next step is armed");
  assertEquals(await readManifest(store, repo), null, "nothing published after the fetch");
  const tmp = await store.list(`repos/${repo.id}/tmp/`);
  assert(tmp.some((o) => o.key.includes("segment-1")), "the pack waits as segments");

  // Every alarm runs on a fresh instance (the previous one was killed); one step also dies
  // half-way through writing its pack and is retried by the next alarm.
  let alarms = 0;
  let failedOnce = false;
  while ((await storage.get<PendingBuild>(BUILD_KEY)) !== undefined) {
    const pending = (await storage.get<PendingBuild>(BUILD_KEY))!;
    if (pending.state.next === "split" && pending.state.written.length === 1 && !failedOnce) {
      store.failPuts = 1;
      failedOnce = true;
    }
    await instance().alarm();
    alarms++;
    if ((await storage.get<PendingBuild>(BUILD_KEY)) !== undefined) {
      assertEquals(
        await readManifest(store, repo),
        null,
        `nothing published after alarm ${alarms}`,
      );
    }
    assert(alarms < 20, "the build ends");
  }
  assert(failedOnce, "a step failed half-way");
  assertEquals(alarms, 3 + 1 + 1, "three packs, one retry, the publication");

  const status = await instance().status(repo);
  assertEquals(status.state, "ready");
  assertEquals(status.lastError, null);
  assertEquals(status.lastBuild?.invocations, 1 + 3 + 1);
  const manifest = (await readManifest(store, repo))!;
  assertEquals(manifestPacks(manifest).length, 3);
  assertEquals(
    await objectsOf(
      `${dir.path}/store`,
      manifestPacks(manifest).map((p) => p.key),
      `${dir.path}/scratch`,
    ),
    await originObjects(`${origin.root}/r.git`),
    "the snapshot holds exactly the origin's objects",
  );
  assertEquals(await store.list(`repos/${repo.id}/tmp/`), [], "temporary objects removed");
});

Deno.test("a build whose step keeps failing is abandoned and leaves nothing behind", async () => {
  const { origin, dir, store, repo, storage, instance } = await setup();
  await using _o = origin;
  await using _d = dir;
  const first = instance();
  const warm = first.warm(repo, noAuth);
  while ((await storage.get<PendingBuild>(BUILD_KEY)) === undefined) {
    await new Promise((r) => setTimeout(r, 10));
  }
  store.failPuts = MAX_STEP_ATTEMPTS;
  for (let i = 0; i < MAX_STEP_ATTEMPTS; i++) await first.alarm();
  await assertRejects(
    () => withinDeadline(warm, "the abandoned build's warm"),
    Error,
    "injected failure",
  );
  assertEquals(await storage.get(BUILD_KEY), undefined, "no build pending");
  const status = await first.status(repo);
  assertEquals(status.state, "none");
  assert(status.lastError?.includes("injected failure"), String(status.lastError));
  assertEquals(await store.list(`repos/${repo.id}/`), [], "nothing left in the store");
  assertEquals(await readManifest(store, repo), null);
});

Deno.test("a build that fails after writing a pack removes it; a step's failures do not count against the next step", async () => {
  const { origin, dir, store, repo, storage, instance } = await setup();
  await using _o = origin;
  await using _d = dir;
  const pending = async () => await storage.get<PendingBuild>(BUILD_KEY);
  const first = instance();
  const warm = first.warm(repo, noAuth);
  while ((await pending()) === undefined) await new Promise((r) => setTimeout(r, 10));
  // Each of the first two split steps fails all but its last attempt: a build that resets the
  // count after a good step gets through.
  for (let step = 0; step < 2; step++) {
    const written = (await pending())!.state;
    assert(written.next === "split" && written.written.length === step, `split ${step}`);
    store.failPuts = MAX_STEP_ATTEMPTS - 1;
    for (let i = 0; i < MAX_STEP_ATTEMPTS; i++) await first.alarm();
    assertEquals((await pending())?.attempts, 0, `split ${step} done, the count reset`);
  }
  const packs = await store.list(`repos/${repo.id}/packs/`);
  assert(packs.length >= 2, `two packs written: ${packs.map((p) => p.key).join(", ")}`);
  // The third split keeps failing: the build is abandoned, and the packs it wrote go with it.
  store.failPuts = MAX_STEP_ATTEMPTS;
  for (let i = 0; i < MAX_STEP_ATTEMPTS; i++) await first.alarm();
  await assertRejects(() => withinDeadline(warm, "the abandoned build's warm"), Error, "injected");
  assertEquals(await pending(), undefined, "no build pending");
  assertEquals(await store.list(`repos/${repo.id}/`), [], "nothing left in the store");
  assertEquals(await readManifest(store, repo), null);
});

Deno.test("a new build removes the segments of a build killed before it was recorded", async () => {
  const { origin, dir, store, repo, newBuilder } = await setup();
  await using _o = origin;
  await using _d = dir;
  const builder = newBuilder();
  // The first steps of a build (tips, the pack as segments), then nothing: killed.
  const begun = await builder.begin(repo, noAuth, null);
  assert("state" in begun, "a build to run");
  const fetched = await builder.step(begun.state, noAuth);
  assert("state" in fetched && fetched.state.next === "split", "fetched");
  const tmp = `repos/${repo.id}/tmp/`;
  assert((await store.list(tmp)).length > 0, "the killed build's segments are there");
  // A new build (another id) runs to the end: the leftovers are gone.
  const manifest = await builder.build(repo, noAuth, null);
  assertEquals(manifestPacks(manifest).length, 3);
  assertEquals(await store.list(tmp), [], "no segments left of either build");
});
