/**
 * `orphanedSince` (src/proxy/origin/origin.ts) against a real `git http-backend`: whether a
 * refresh may layer on the previous snapshot's packs.
 */
import { originFormat, orphanedSince } from "../../../src/proxy/origin/origin.ts";
import type { RepoRef } from "../../../src/proxy/core/repo.ts";
import { startOrigin } from "../../support/origin.ts";
import { addCommits, makeRepo, refsOf } from "../../support/fixtures.ts";
import { git } from "../../support/git.ts";
import { assertEquals } from "../../support/assert.ts";

Deno.test("orphanedSince: none after fast-forwards; some after a force push (pruned or not) or a deleted ref", async () => {
  await using origin = await startOrigin();
  const { bare } = await makeRepo(origin, "r.git", { commits: 4, branches: 1 });
  const repo: RepoRef = { id: "r", path: "r.git", originUrl: origin.repoUrl("r.git") };
  const originFetch = (r: Request) => fetch(r);
  const auth = { headers: {} };
  const format = await originFormat(originFetch, repo, auth);
  const tips = async () =>
    Object.values(await refsOf(bare)).filter((v, i, a) => a.indexOf(v) === i);
  const orphaned = async (before: string[]) =>
    await orphanedSince(originFetch, repo, auth, format, before, await tips());

  const first = await tips();
  origin.stats.reset();
  assertEquals(await orphaned(first), false, "nothing moved");
  assertEquals(origin.stats.requests, 0, "and nothing asked");
  await addCommits(origin, "r.git", { commits: 2 });
  assertEquals(await orphaned(first), false, "main fast-forwarded");

  // main rewound by one commit: its old tip is still in the origin's store, reachable from no ref.
  const second = await tips();
  await git(["update-ref", "refs/heads/main", "main~1"], { cwd: bare });
  assertEquals(await orphaned(second), true, "a force push, objects not yet pruned");
  // ...and pruned: the old tip is gone (the origin answers ERR).
  await git(["reflog", "expire", "--expire=now", "--all"], { cwd: bare });
  await git(["gc", "-q", "--prune=now"], { cwd: bare });
  assertEquals(await orphaned(second), true, "a force push, pruned");

  // A branch deleted whose tip no other ref reaches.
  const third = await tips();
  const refs = await refsOf(bare);
  const branch = Object.keys(refs).find((r) =>
    r.startsWith("refs/heads/") && r !== "refs/heads/main"
  )!;
  const merged = await git(["merge-base", "--is-ancestor", refs[branch], "main"], { cwd: bare })
    .then(() => true, () => false);
  await git(["update-ref", "-d", branch], { cwd: bare });
  assertEquals(await orphaned(third), !merged, `${branch} deleted (merged into main: ${merged})`);
});
