/**
 * The snapshot builder against a real origin and the filesystem store: layers, compaction, garbage
 * collection with a grace period, and a failed build that leaves the published manifest alone.
 */
import { SnapshotBuilder } from "../../../src/proxy/snapshots/snapshot.ts";
import { manifestPacks, readManifest } from "../../../src/proxy/core/manifest.ts";
import { OriginAnswerError, OriginUnreachableError } from "../../../src/proxy/origin/origin.ts";
import { repoId, type RepoRef } from "../../../src/proxy/core/repo.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { gitPackIndexBuilder } from "../../../edge/deno/pack_index_builder.ts";
import type { ByteRange, PackStore } from "../../../src/storage/store.ts";
import { ForwardingStore } from "../../support/forwarding_store.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { startRelay } from "../../support/relay.ts";
import { addCommits, makeRepo } from "../../support/fixtures.ts";
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";

const noAuth = { headers: {} };

/** Object ids in the stored packs `keys`, each indexed on its own by `git index-pack` (self-contained). */
async function objectsOf(storeRoot: string, keys: string[], scratch: string): Promise<Set<string>> {
  const ids = new Set<string>();
  await git(["init", "-q", "--bare", scratch]);
  for (const key of keys) {
    const out = await git(["index-pack", "-o", `${scratch}/x.idx`, `${storeRoot}/${key}`], {
      cwd: scratch,
    });
    assert(/^[0-9a-f]{40}$/.test(out.trim()), `index-pack accepted ${key}`);
    const idx = await Deno.readFile(`${scratch}/x.idx`);
    const listing = await git(["show-index"], { stdin: idx });
    for (const line of listing.trim().split("\n")) ids.add(line.split(" ")[1]);
    await Deno.remove(`${scratch}/x.idx`);
  }
  return ids;
}

Deno.test("snapshot layers, compaction and garbage collection", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  await makeRepo(origin, "r.git", { commits: 12, binaryBytes: 400_000 });
  const store = new FsPackStore(`${dir.path}/store`);
  let offset = 0;
  const clock = { now: () => Date.now() + offset };
  const builder = new SnapshotBuilder({
    store,
    originFetch: (r) => fetch(r),
    clock,
    chunks: 2,
    maxLayers: 2,
    graceMs: 60_000,
    minSplitBytes: 1,
  });
  const originUrl = origin.repoUrl("r.git");
  const repo: RepoRef = { id: repoId(originUrl), originUrl, path: "r.git" };

  const m1 = await builder.build(repo, noAuth, null);
  assertEquals(m1.layers.length, 1, "first build: one layer");
  assertEquals(m1.layers[0].length, 2, "split into two packs");
  assertEquals(await builder.build(repo, noAuth, m1), m1, "origin unchanged: same manifest");

  await addCommits(origin, "r.git", { commits: 2, tag: "v2" });
  const m2 = await builder.build(repo, noAuth, m1);
  assertEquals(m2.layers.length, 2, "refresh: a second layer");
  assertEquals(m2.layers[0], m1.layers[0], "first layer kept");

  await addCommits(origin, "r.git", { commits: 1 });
  const m3 = await builder.build(repo, noAuth, m2);
  assertEquals(m3.layers.length, 1, "compacted into one full layer");
  assertEquals((await readManifest(store, repo))?.builtAt, m3.builtAt, "published");

  // Every object of the origin is in the compacted snapshot, each pack self-contained.
  const want = new Set(
    (await git(["cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], {
      cwd: `${origin.root}/r.git`,
    })).trim().split("\n"),
  );
  const got = await objectsOf(
    `${dir.path}/store`,
    manifestPacks(m3).map((p) => p.key),
    `${dir.path}/scratch`,
  );
  assertEquals([...got].sort(), [...want].sort(), "snapshot objects equal the origin's");

  // Old packs survive the grace period, then go.
  const before = await store.list(`repos/${repo.id}/packs/`);
  assertEquals(
    before.length,
    manifestPacks(m1).length + manifestPacks(m2).length - 2 + 2,
    "old packs kept in grace",
  );
  assertEquals(await builder.collectGarbage(repo, m3), 0, "nothing collected within grace");
  offset = 120_000;
  const deleted = await builder.collectGarbage(repo, m3);
  assertEquals(deleted, before.length - manifestPacks(m3).length, "unreferenced packs collected");
  const after = (await store.list(`repos/${repo.id}/packs/`)).map((o) => o.key).sort();
  assertEquals(
    after,
    manifestPacks(m3).map((p) => p.key).sort(),
    "only the manifest's packs remain",
  );

  // A build that fails leaves the published manifest untouched.
  await addCommits(origin, "r.git", { commits: 1 });
  await origin.stop();
  let err: unknown;
  try {
    await builder.build(repo, noAuth, m3);
  } catch (e) {
    err = e;
  }
  assert(err instanceof OriginUnreachableError, `origin unreachable: ${err}`);
  assertEquals(await readManifest(store, repo), m3, "manifest unchanged");
});

Deno.test("a corrupt or truncated pack from the origin fails the build and publishes nothing", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  await makeRepo(origin, "r.git", { commits: 6, binaryBytes: 600_000 });
  const buildVia = async (relayUrl: string, store: FsPackStore) => {
    const builder = new SnapshotBuilder({
      store,
      originFetch: (r) => fetch(r),
      clock: { now: () => Date.now() },
      chunks: 2,
    });
    const originUrl = `${relayUrl}/r.git`;
    const repo: RepoRef = { id: repoId(originUrl), originUrl, path: "r.git" };
    return { repo, result: await builder.build(repo, noAuth, null).then(() => null, (e) => e) };
  };
  {
    // Control: through a fault-free relay the same build succeeds.
    await using relay = await startRelay(origin.url);
    const { result } = await buildVia(relay.url, new FsPackStore(`${dir.path}/control`));
    assertEquals(result, null, "the control build succeeds");
  }
  for (
    const fault of [
      { kind: "corrupt", atByte: 300_000, times: 3 },
      { kind: "truncate", afterBytes: 300_000, times: 3 },
    ] as const
  ) {
    // The advertisement (object format), ls-refs and fetch all pass the relay; only the fetch
    // response is long enough to be hit.
    await using relay = await startRelay(origin.url, { faults: { "*": fault } });
    const store = new FsPackStore(`${dir.path}/${fault.kind}`);
    const { repo, result: err } = await buildVia(relay.url, store);
    // The origin's failure (a 502 to a warm), saying what it did: a bad pack, or cut short.
    assert(err instanceof OriginAnswerError, `${fault.kind}: the origin's failure, got ${err}`);
    assertMatch(
      err.message,
      fault.kind === "corrupt" ? /is malformed: pack trailer/ : /was cut short|is malformed/,
      fault.kind,
    );
    assertEquals(await readManifest(store, repo), null, `${fault.kind}: no manifest`);
    assertEquals(await store.list(""), [], `${fault.kind}: nothing left in the store`);
  }
});

/** The filesystem store, counting reads of each build's temporary segments. */
class SegmentCountingStore extends ForwardingStore {
  segmentReads = 0;
  segmentWrites = 0;
  override put(key: string, body: ReadableStream<Uint8Array>) {
    if (/\/segment-\d+$/.test(key)) this.segmentWrites++;
    return this.inner.put(key, body);
  }
  override get(key: string, range?: ByteRange) {
    if (/\/segment-\d+$/.test(key)) this.segmentReads++;
    return this.inner.get(key, range);
  }
}

Deno.test("a build in one invocation reads the origin's pack back once for all its packs", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  await makeRepo(origin, "r.git", { commits: 10, binaryBytes: 900_000 });
  const originUrl = origin.repoUrl("r.git");
  const repo: RepoRef = { id: repoId(originUrl), originUrl, path: "r.git" };
  const builderOn = (store: PackStore) =>
    new SnapshotBuilder({
      store,
      originFetch: (r) => fetch(r),
      clock: { now: () => Date.now() },
      chunks: 3,
      minSplitBytes: 1,
      segmentBytes: 64 * 1024,
    });

  const store = new SegmentCountingStore(new FsPackStore(`${dir.path}/store`));
  const manifest = await builderOn(store).build(repo, noAuth, null);
  const packs = manifestPacks(manifest);
  assertEquals(packs.length, 3, "split into three packs");
  assert(store.segmentWrites > 3, `several segments (${store.segmentWrites})`);
  // One pass writes every pack: each segment is read once, not once per pack (the Deno server's
  // builds took twice as long when every pack re-read the whole origin pack).
  assertEquals(store.segmentReads, store.segmentWrites, "each segment read back once");

  // Step by step (one pack per step, as on Workers) the packs come out byte for byte the same.
  const stepStore = new FsPackStore(`${dir.path}/steps`);
  const stepped = builderOn(stepStore);
  let progress = await stepped.begin(repo, noAuth, null);
  while ("state" in progress) progress = await stepped.step(progress.state, noAuth);
  const steppedPacks = manifestPacks(progress.done);
  assertEquals(steppedPacks.map((p) => p.hash), packs.map((p) => p.hash), "same packs");
  for (const [i, p] of packs.entries()) {
    assertEquals(
      await Deno.readFile(`${dir.path}/steps/${steppedPacks[i].key}`),
      await Deno.readFile(`${dir.path}/store/${p.key}`),
      `pack ${i} identical`,
    );
  }
  const want = (await git(["cat-file", "--batch-all-objects", "--batch-check=%(objectname)"], {
    cwd: `${origin.root}/r.git`,
  })).trim().split("\n").sort();
  const got = await objectsOf(`${dir.path}/store`, packs.map((p) => p.key), `${dir.path}/scratch`);
  assertEquals([...got].sort(), want, "snapshot objects equal the origin's");
});

Deno.test("pack indexes: a refresh indexes its own packs and keeps the older layer's; a failed index publishes nothing; turned off, the manifest names none", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  await makeRepo(origin, "r.git", { commits: 6, binaryBytes: 200_000 });
  const store = new FsPackStore(`${dir.path}/store`);
  const clock = { now: () => Date.now() };
  const built: string[] = [];
  let fail = false;
  const indexing = new SnapshotBuilder({
    store,
    originFetch: (r) => fetch(r),
    clock,
    chunks: 2,
    minSplitBytes: 1,
    buildIndex: async (packKey, indexKey, format) => {
      built.push(packKey);
      if (fail) throw new Error("index-pack died");
      await gitPackIndexBuilder(store)(packKey, indexKey, format);
    },
  });
  const originUrl = origin.repoUrl("r.git");
  const repo: RepoRef = { id: repoId(originUrl), originUrl, path: "r.git" };
  const m1 = await indexing.build(repo, noAuth, null);
  assertEquals(built, manifestPacks(m1).map((p) => p.key), "each pack indexed once");
  for (const p of manifestPacks(m1)) {
    assertEquals((await store.head(p.index!.key))?.size, p.index!.size, `${p.key}'s index`);
  }

  await addCommits(origin, "r.git", { commits: 2 });
  built.length = 0;
  const m2 = await indexing.build(repo, noAuth, m1);
  assertEquals(m2.layers[0], m1.layers[0], "the older layer and its indexes kept");
  assertEquals(built, m2.layers[1].map((p) => p.key), "only the new layer's packs indexed");

  await addCommits(origin, "r.git", { commits: 1 });
  fail = true;
  let failed = false;
  await indexing.build(repo, noAuth, m2).catch(() => failed = true);
  assert(failed, "a failed index fails the build");
  assertEquals((await readManifest(store, repo))?.builtAt, m2.builtAt, "nothing published");

  const plain = new SnapshotBuilder({
    store,
    originFetch: (r) => fetch(r),
    clock,
    chunks: 2,
    minSplitBytes: 1,
  });
  const m3 = await plain.build(repo, noAuth, m2);
  assert(manifestPacks(m3).every((p) => p.index === undefined), "indexes off: none named");
});
