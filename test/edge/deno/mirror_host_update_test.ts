/**
 * `GitMirrorHost.update` on its own against a real `git http-backend` origin: with no listing (as
 * a caller other than a fetch, a refresh say, calls it) one `ls-refs` and one `fetch`, the refs
 * set as the origin lists them and pruned; with the caller's listing, one `fetch` and nothing
 * else; with a refused credential, nothing changed.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { addCommits, makeRepo, refsOf } from "../../support/fixtures.ts";
import { GitMirrorHost } from "../../../edge/deno/mirror.ts";

const NAME = "h.git";

/** Branches and tags of a bare repository. */
async function headsAndTags(dir: string): Promise<Record<string, string>> {
  const all = await refsOf(dir);
  return Object.fromEntries(
    Object.entries(all).filter(([ref]) => /^refs\/(heads|tags)\//.test(ref)).sort(),
  );
}

Deno.test("mirror host update: no listing: one ls-refs and one fetch, refs as the origin's, pruned; a listing given: one fetch; refused: nothing changes", async () => {
  await using dir = await tempDir();
  const auth = { user: "ci", password: "pw" };
  await using origin = await startOrigin({ requireAuth: auth });
  await makeRepo(origin, NAME, { commits: 6 });
  const bare = `${origin.root}/${NAME}`;
  // A mirror as a seed leaves it: a bare copy of the origin's refs of the moment.
  const id = "ab12";
  await git(["clone", "-q", "--bare", bare, `${dir.path}/${id}.git`]);
  const host = new GitMirrorHost({ dir: dir.path, store: null as never });
  const repo = { id, path: NAME, originUrl: `${origin.url}/${NAME}` };
  const good = { headers: { authorization: `Basic ${btoa("ci:pw")}` } };
  const mirror = `${dir.path}/${id}.git`;

  // The origin moves on: new commits and a tag, a new branch, a branch deleted.
  await addCommits(origin, NAME, { commits: 2, tag: "v-next" });
  await git(["branch", "extra", "main"], { cwd: bare });
  const gone = Object.keys(await headsAndTags(bare)).find((r) =>
    r.startsWith("refs/heads/") && r !== "refs/heads/main" && r !== "refs/heads/extra"
  );
  if (gone) await git(["update-ref", "-d", gone], { cwd: bare });

  origin.stats.reset();
  await host.update(repo, good, []);
  assertEquals(origin.stats.commands, { "ls-refs": 1, fetch: 1 });
  assertEquals(origin.stats.requests, 2);
  assertEquals(await headsAndTags(mirror), await headsAndTags(bare));
  await git(["fsck", "--full", "--no-progress"], { cwd: mirror });
  const packs = [...Deno.readDirSync(`${mirror}/objects/pack`)].map((e) => e.name);
  assert(!packs.some((p) => p.endsWith(".keep")), `no .keep left: ${packs}`);

  // With the caller's listing: one fetch, no listing of its own.
  const { tip } = await addCommits(origin, NAME, { commits: 1 });
  origin.stats.reset();
  await host.update(repo, good, [], { refs: { "refs/heads/main": tip } });
  assertEquals(origin.stats.commands, { fetch: 1 });
  assertEquals((await headsAndTags(mirror))["refs/heads/main"], tip);

  // Refused: the origin's 401 is told, nothing fetched, no ref moved.
  const next = await addCommits(origin, NAME, { commits: 1 });
  const before = await headsAndTags(mirror);
  const told: number[] = [];
  let failed = false;
  await host.update(repo, { headers: { authorization: `Basic ${btoa("ci:no")}` } }, [], {
    refs: { "refs/heads/main": next.tip },
    onOriginStatus: (s) => told.push(s),
  }).catch(() => failed = true);
  assert(failed, "the refused update failed");
  assertEquals(told, [401]);
  assertEquals(await headsAndTags(mirror), before);
  assertEquals(await host.missing(repo, [next.tip]), [next.tip]);
});
