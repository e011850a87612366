/**
 * The tag digest of a cached `--depth 1` fetch taken from the clone's own `ls-refs`
 * (src/proxy/origin/tag_listings.ts) on the Deno server: a response-cache hit costs the origin one
 * `ls-refs`, not two, and a tag made at the origin just before a clone is in that clone.
 */
import { assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { makeRepo } from "../../support/fixtures.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { depthHitsAskOneLsRefs } from "../../proxy/tag_listings_suite.ts";

Deno.test("a --depth 1 cache hit asks the origin one ls-refs (the clone's own), and a tag made just before a clone is in it", () =>
  depthHitsAskOneLsRefs(denoEdgeFactory));

Deno.test("--ls-refs-ahead 0: a --depth 1 cache hit asks the origin for its tags itself", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url, lsRefsAheadSeconds: 0 });
  await makeRepo(origin, "r.git", { commits: 4, tags: 1 });
  for (const n of [0, 1]) {
    origin.stats.reset();
    await git(["clone", "-q", "--bare", "--depth", "1", `${edge.url}/r.git`, `${dir.path}/c${n}`]);
  }
  assertEquals(origin.stats.commands["ls-refs"], 2, "the clone's own and the edge's tag listing");
  assertEquals(origin.stats.commands.fetch ?? 0, 0, "a hit");
});
