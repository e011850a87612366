/** The tag digest and the ls-refs requests that list every tag (src/proxy/origin/tag_listings.ts). */
import { assert, assertEquals } from "../../support/assert.ts";
import { decodePkts, encodePkts } from "../../../src/git/pktline.ts";
import { listsEveryTag, TagDigest } from "../../../src/proxy/origin/tag_listings.ts";

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
