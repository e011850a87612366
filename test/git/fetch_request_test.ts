import { assertEquals, assertThrows } from "../support/assert.ts";
import { ProtocolError } from "../../src/git/errors.ts";
import { emptyFetchArgs, parseFetchArgs, serializeFetchArgs } from "../../src/git/fetch_request.ts";

Deno.test("fetch args: every field round-trips in git's order; bad values are rejected", () => {
  const oid = "0123456789abcdef0123456789abcdef01234567";
  const sha256 = "ab".repeat(32);
  const args = [
    "wait-for-done",
    "thin-pack",
    "no-progress",
    "include-tag",
    "ofs-delta",
    "sideband-all",
    `shallow ${oid}`,
    "deepen 3",
    "deepen-since 1700000000",
    "deepen-not refs/tags/v1",
    "deepen-relative",
    "filter tree:0",
    "packfile-uris https,http",
    `want ${oid}`,
    `want ${sha256}`,
    "want-ref refs/heads/main",
    `have ${oid}`,
    "future-arg x",
    "done",
  ];
  const parsed = parseFetchArgs(args);
  assertEquals(parsed.packfileUris, ["https", "http"]);
  assertEquals(parsed.wants, [oid, sha256]);
  assertEquals(parsed.other, ["future-arg x"]);
  assertEquals(serializeFetchArgs(parsed), args);
  assertEquals(serializeFetchArgs(emptyFetchArgs()), []);
  for (const bad of [`want ${oid.slice(1)}`, "have XYZ", `shallow ${oid.toUpperCase()}`]) {
    assertEquals(assertThrows(() => parseFetchArgs([bad]), ProtocolError).code, "bad-oid");
  }
  for (const bad of ["deepen 0", "deepen x", "deepen-since -1", "filter ", "want-ref "]) {
    assertEquals(assertThrows(() => parseFetchArgs([bad]), ProtocolError).code, "bad-fetch-arg");
  }
});
