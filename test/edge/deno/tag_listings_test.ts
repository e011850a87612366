/**
 * The tag digest of a cached `--depth 1` fetch taken from the clone's own `ls-refs`
 * (src/proxy/tag_listings.ts) on the Deno server: a response-cache hit costs the origin one
 * `ls-refs`, not two, and a tag made at the origin just before a clone is in that clone.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo, refsOf } from "../../support/fixtures.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { encodePkts } from "../../../src/git/pktline.ts";
import { listsEveryTag, TagDigest } from "../../../src/proxy/tag_listings.ts";
import { decodePkts } from "../../../src/git/pktline.ts";

const REPO = "r.git";

async function metric(edgeUrl: string, line: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return Number(text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1] ?? 0);
}

Deno.test("a --depth 1 cache hit asks the origin one ls-refs (the clone's own), and a tag made just before a clone is in it", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url });
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
});

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
