/**
 * The tag digest of a cached `--depth 1` fetch taken from the clone's own `ls-refs`
 * (src/proxy/origin/tag_listings.ts) on the Deno server: a response-cache hit costs the origin one
 * `ls-refs`, not two, and a tag made at the origin just before a clone is in that clone.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { makeRepo } from "../../support/fixtures.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { decodePkts, encodePkts } from "../../../src/git/pktline.ts";
import { listsEveryTag, TagDigest } from "../../../src/proxy/origin/tag_listings.ts";
import { depthHitsAskOneLsRefs } from "../../proxy/tag_listings_suite.ts";

Deno.test("a --depth 1 cache hit asks the origin one ls-refs (the clone's own), and a tag made just before a clone is in it", () =>
  depthHitsAskOneLsRefs(denoEdgeFactory));

Deno.test("TagDigest: a clone's listing and a listing of tags alone give one digest; listsEveryTag", () => {
  const oid = (c: string) => c.repeat(40);
  const client = encodePkts([
    `${oid("a")} HEAD symref-target:refs/heads/main\n`,
    `${oid("a")} refs/heads/main\n`,
    `${oid("b")} refs/tags/v1 peeled:${oid("a")}\n`,
    `${oid("c")} refs/tags/v2\n`,
    "flush",
  ]);
  const tags = encodePkts([
    `${oid("b")} refs/tags/v1 peeled:${oid("a")}\n`,
    `${oid("c")} refs/tags/v2\n`,
    "flush",
  ]);
  const digestOf = (bytes: Uint8Array, piece: number) => {
    const d = new TagDigest();
    for (let at = 0; at < bytes.length; at += piece) d.push(bytes.subarray(at, at + piece));
    return d.value();
  };
  const one = digestOf(tags, tags.length);
  assert(one !== null);
  for (const piece of [1, 3, 7, 1000]) assertEquals(digestOf(client, piece), one);
  const moved = encodePkts([`${oid("d")} refs/tags/v1 peeled:${oid("a")}\n`, "flush"]);
  assert(digestOf(moved, 5) !== one, "a moved tag: another digest");
  assertEquals(digestOf(client.subarray(0, client.length - 4), 5), null, "cut short: none");
  const req = (...args: string[]) =>
    decodePkts(encodePkts(["command=ls-refs\n", "delim", ...args.map((a) => `${a}\n`), "flush"]));
  assert(listsEveryTag(req("peel", "symrefs", "ref-prefix HEAD", "ref-prefix refs/tags/")));
  assert(listsEveryTag(req("peel")), "no prefix: every ref");
  assert(!listsEveryTag(req("symrefs", "ref-prefix refs/tags/")), "not peeled");
  assert(!listsEveryTag(req("peel", "ref-prefix refs/heads/")), "no tags");
  assert(!listsEveryTag(req("peel", "ref-prefix refs/tags/v1")), "some tags");
  assert(!listsEveryTag(req("peel", "ref-prefix refs/tags/", "narrow-somehow")), "unknown arg");
});

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
