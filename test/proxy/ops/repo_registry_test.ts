/** The repository registry: counts of several processes add up in the store; pins and evictions. */
import { RepoRegistry } from "../../../src/proxy/ops/repo_registry.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";
import type { RepoRef } from "../../../src/proxy/core/repo.ts";
import { assert, assertEquals } from "../../support/assert.ts";
import { tempDir } from "../../support/git.ts";

const REPO: RepoRef = { id: "a".repeat(32), path: "x/y.git", originUrl: "http://o/x/y.git" };
const MANIFEST = {
  version: 1,
  originUrl: REPO.originUrl,
  tips: {},
  layers: [[{ hash: "1".repeat(40), key: "k", size: 100, objects: 1 }]],
  builtAt: 500,
} as Manifest;

Deno.test("two processes' counts add up in the stored record; times keep their latest", async () => {
  await using dir = await tempDir();
  const store = new FsPackStore(dir.path);
  let now = 1000;
  const clock = { now: () => now };
  const one = new RepoRegistry(store, clock);
  const two = new RepoRegistry(store, clock);
  one.noteFetch(REPO, "answered", true, MANIFEST);
  one.noteFetch(REPO, "passthrough", true);
  one.notePackBytes(REPO.id, 100);
  now = 2000;
  two.noteFetch(REPO, "rewritten", true);
  two.noteFetch({ ...REPO, id: "b".repeat(32) }, "passthrough", false); // never served: not kept
  assert(one.due() && two.due(), "a new record is due at once");
  await two.flush();
  await one.flush(); // the older news last: times stay at their latest
  assert(!one.due(), "nothing left to write");
  const [r, ...rest] = await new RepoRegistry(store, clock).list();
  assertEquals(rest, [], "one repository");
  assertEquals(
    [r.fetches, r.fromSnapshot, r.answered, r.packBytes, r.lastClonedAt, r.builtAt, r.packs],
    [3, 2, 1, 100, 2000, 500, 1],
  );
  // More counts in one process: due only after the flush interval, then added, not replaced.
  one.noteFetch(REPO, "cached", true);
  assert(!one.due(), "not yet due");
  now += 10_000;
  assert(one.due());
  await one.flush();
  const [again] = await new RepoRegistry(store, clock).list();
  assertEquals([again.fetches, again.cached], [4, 1]);
});

Deno.test("a pinned repository is not evicted; an eviction begun since a lookup stops the pin", async () => {
  const clock = { now: () => 1000 };
  const registry = new RepoRegistry(new FsPackStore("/nonexistent-never-written"), clock);
  assert(registry.pin(REPO, 5000), "pinned until 5000");
  assertEquals(await registry.beginEviction(REPO.id, 4999), false, "pinned: spared");
  const epoch = registry.evictionEpoch(REPO.id);
  assert(await registry.beginEviction(REPO.id, 5000), "the pin lapsed");
  assertEquals(registry.pin(REPO, 9000), false, "being evicted: nothing handed out");
  await registry.endEviction(null, REPO.id, true);
  assertEquals(registry.pin(REPO, 9000, epoch), false, "evicted since the lookup");
  assert(registry.pin(REPO, 9000), "a fresh lookup may pin again");
});
