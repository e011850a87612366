/**
 * The store cap's sweep (src/proxy/ops/store_eviction.ts) on a store that keeps whole seconds, as
 * S3's `LastModified` does: two snapshots written in the same second are both "written last", and
 * neither goes before it served (issue #34's thrash, through a tie). A filesystem store under a
 * view that rounds its times down to the second.
 */
import { assertEquals } from "../../support/assert.ts";
import { tempDir } from "../../support/git.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { StoreEvictor } from "../../../src/proxy/ops/store_eviction.ts";
import { RepoRegistry } from "../../../src/proxy/ops/repo_registry.ts";
import { Metrics } from "../../../src/proxy/core/metrics.ts";
import type { SnapshotCoordinator } from "../../../src/proxy/core/deps.ts";
import type { ObjectInfo, PackStore } from "../../../src/storage/store.ts";
import { putBytes } from "../../../src/storage/store.ts";

/** `inner` as a store whose times are `at(key)` (whole seconds), as S3 lists them. */
function wholeSeconds(inner: PackStore, at: (key: string) => number): PackStore {
  const view = (o: ObjectInfo): ObjectInfo => ({ ...o, modified: at(o.key) });
  return {
    put: (key, body) => inner.put(key, body),
    get: (key, range) => inner.get(key, range),
    head: async (key) => {
      const o = await inner.head(key);
      return o && view(o);
    },
    delete: (key) => inner.delete(key),
    list: async (prefix) => (await inner.list(prefix)).map(view),
  };
}

Deno.test("store cap: two snapshots written in the same second (a store of whole seconds) are both spared until they served; an older unserved one goes", async () => {
  await using dir = await tempDir();
  const second = Math.floor(Date.now() / 1000) * 1000;
  const [a, b, old] = ["aa11", "bb22", "cc33"];
  const store = wholeSeconds(
    new FsPackStore(dir.path),
    (key) => key.startsWith(`repos/${old}/`) ? second - 60_000 : second,
  );
  for (const id of [a, b, old]) {
    await putBytes(store, `repos/${id}/packs/pack-${id}.pack`, new Uint8Array(1000));
  }
  const clock = { now: () => second + 500 };
  const evictor = new StoreEvictor({
    store,
    registry: new RepoRegistry(store, clock),
    // Asked only of repositories the registry knows; it knows none here.
    coordinator: {} as SnapshotCoordinator,
    clock,
    metrics: new Metrics(),
    maxBytes: 1500,
  });
  const report = await evictor.sweep();
  assertEquals(report.evicted.map((e) => e.id), [old], "the older one, never cloned, goes");
  assertEquals(
    report.spared.map((s) => [s.id, s.reason]).sort(),
    [[a, "fresh"], [b, "fresh"]],
    "both written last are spared",
  );
  assertEquals(report.after, 2000);
  for (const id of [a, b]) {
    assertEquals((await store.list(`repos/${id}/`)).length, 1, `${id} kept`);
  }
});
