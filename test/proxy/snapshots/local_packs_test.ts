/**
 * The snapshot builder's `localPacks` (snapshot.ts `LocalPacker`): a refresh takes the local
 * pack instead of the origin's, and a local pack that fails the checks an origin's pack passes
 * is dropped, the build then fetching from the origin as without one.
 */
import { type LocalPacker, SnapshotBuilder } from "../../../src/proxy/snapshots/snapshot.ts";
import { manifestPacks } from "../../../src/proxy/core/manifest.ts";
import { repoId, type RepoRef } from "../../../src/proxy/core/repo.ts";
import { tmpPrefix } from "../../../src/proxy/core/store_layout.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { gitBytes, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { addCommits, makeRepo } from "../../support/fixtures.ts";
import { assert, assertEquals } from "../../support/assert.ts";

const noAuth = { headers: {} };

Deno.test("local packs: a refresh layer comes from the local pack (the origin computes none); a damaged local pack is dropped and the origin's taken", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  await makeRepo(origin, "r.git", { commits: 8 });
  const bare = `${origin.root}/r.git`;
  /** What the fake local copy does with a request: a whole pack, half of one, or nothing. */
  let mode: "whole" | "half" | "none" = "none";
  const asked: { wants: string[]; haves: string[] }[] = [];
  const forgotten: string[] = [];
  const local: LocalPacker = {
    async pack(_repo, _auth, wants, haves) {
      asked.push({ wants, haves });
      if (mode === "none") return null;
      const revs = [...wants, ...haves.map((h) => `^${h}`)].join("\n") + "\n";
      const pack = await gitBytes(["pack-objects", "--revs", "--stdout", "-q"], {
        cwd: bare,
        stdin: new TextEncoder().encode(revs),
      });
      return ReadableStream.from([mode === "whole" ? pack : pack.subarray(0, pack.length >> 1)]);
    },
    forget(repo) {
      forgotten.push(repo.id);
      return Promise.resolve();
    },
  };
  const store = new FsPackStore(`${dir.path}/store`);
  const builder = new SnapshotBuilder({
    store,
    originFetch: (r) => fetch(r),
    clock: { now: () => Date.now() },
    chunks: 2,
    localPacks: local,
  });
  const originUrl = origin.repoUrl("r.git");
  const repo: RepoRef = { id: repoId(originUrl), originUrl, path: "r.git" };
  const m1 = await builder.build(repo, noAuth, null);
  assertEquals(asked.length, 1, "a first build asks the local copy too");
  assertEquals(asked[0].haves, [], "for everything");

  await addCommits(origin, "r.git", { commits: 2 });
  mode = "whole";
  origin.stats.reset();
  const m2 = await builder.build(repo, noAuth, m1);
  assertEquals(m2.layers.length, 2, "a refresh layer");
  assertEquals(asked.at(-1)!.haves.sort(), [...new Set(Object.values(m1.tips))].sort());
  // The origin's only fetch was the check for objects it dropped (an empty pack).
  assertEquals(origin.stats.commands["fetch"] ?? 0, 1, JSON.stringify(origin.stats.commands));
  assertEquals(forgotten, [], "nothing dropped: the copy stays");

  await addCommits(origin, "r.git", { commits: 2 });
  mode = "half";
  origin.stats.reset();
  const m3 = await builder.build(repo, noAuth, m2);
  assertEquals(m3.layers.length, 3, "a refresh layer, from the origin");
  assertEquals(origin.stats.commands["fetch"] ?? 0, 2, "the origin's pack after the cut one");
  const last = m3.layers.at(-1)!;
  const got = new Set<string>();
  for (const p of last) {
    const bytes = await Deno.readFile(`${dir.path}/store/${p.key}`);
    assertEquals(p.size, bytes.length);
    got.add(p.hash);
  }
  assert(got.size === last.length, "packs named once");
  assertEquals(await store.list(tmpPrefix(repo.id)), [], "nothing of the cut pack left");
  assertEquals(manifestPacks(m3).length, manifestPacks(m2).length + last.length);
});
