/**
 * The tag digest of a cached `--depth 1` fetch taken from the clone's own `ls-refs`
 * (src/proxy/origin/tag_listings.ts), end to end on either runtime.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { git, tempDir } from "../support/git.ts";
import { startOrigin } from "../support/origin.ts";
import { assertSameClone, makeRepo, refsOf } from "../support/fixtures.ts";
import type { EdgeFactory } from "../support/edge.ts";

const REPO = "r.git";

async function metric(edgeUrl: string, line: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return Number(text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1] ?? 0);
}

/**
 * A `--depth 1` cache hit asks the origin one `ls-refs` (the clone's own), and a tag made just
 * before a clone is in it. Fails without tag_listings.ts: the hit also asked the origin for its
 * tags (2 ls-refs).
 */
export async function depthHitsAskOneLsRefs(factory: EdgeFactory): Promise<void> {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using edge = await factory({ origin: origin.url });
  const { bare } = await makeRepo(origin, REPO, { commits: 6, tags: 2 });
  const d = dir.path;
  let n = 0;
  /** A depth-1 clone through the edge, checked against a direct one; what the origin did. */
  const clone = async () => {
    const name = `c${n++}`;
    origin.stats.reset();
    await git(["clone", "-q", "--bare", "--depth", "1", `${edge.url}/${REPO}`, `${d}/${name}`]);
    const commands = { ...origin.stats.commands };
    await git(["clone", "-q", "--bare", "--depth", "1", origin.repoUrl(REPO), `${d}/${name}-d`]);
    await assertSameClone(`${d}/${name}-d`, `${d}/${name}`);
    return { lsRefs: commands["ls-refs"] ?? 0, fetch: commands.fetch ?? 0, name };
  };
  await clone(); // fills the response cache (and teaches the edge the clone's ls-refs)
  // Fails without tag_listings.ts: the hit also asked the origin for its tags (2 ls-refs).
  assertEquals(await clone(), { lsRefs: 1, fetch: 0, name: "c1" }, "a hit, one ls-refs");
  assertEquals(await metric(edge.url, 'gitedge_tag_digest_total{source="ls-refs"}'), 2);
  // An annotated tag on the tip, made just before the clone: a new digest, so the origin computes
  // this answer (its include-tag brings the tag object), and the clone has the tag.
  await git(["tag", "-a", "-m", "just now", "just-now", "HEAD"], { cwd: bare });
  const late = await clone();
  assertEquals([late.lsRefs, late.fetch], [1, 1], "a miss: the tags moved");
  assert((await refsOf(`${d}/${late.name}`))["refs/tags/just-now"], "the new tag is there");
  assertEquals(await clone(), { lsRefs: 1, fetch: 0, name: "c3" }, "then a hit again");
}
