import { assertEquals, assertThrows } from "../support/assert.ts";
import { ProtocolError } from "../../src/git/errors.ts";
import { formatPackfileUriLine, parsePackfileUriLine } from "../../src/git/packfile_uris.ts";
import { CDN_URI, FAKE_PACK_HASH } from "./transcripts.ts";

Deno.test("packfile-uris lines: a bad hash, URI or line is rejected", () => {
  assertEquals(
    parsePackfileUriLine(formatPackfileUriLine(FAKE_PACK_HASH, CDN_URI)),
    { hash: FAKE_PACK_HASH, uri: CDN_URI },
  );
  assertThrows(() => formatPackfileUriLine("abc", CDN_URI), ProtocolError);
  assertThrows(() => formatPackfileUriLine(FAKE_PACK_HASH, "has space"), ProtocolError);
  for (
    const bad of ["", `${FAKE_PACK_HASH}`, `${FAKE_PACK_HASH}x${CDN_URI}`, `${"g".repeat(40)} u`]
  ) {
    assertEquals(
      assertThrows(() => parsePackfileUriLine(bad), ProtocolError).code,
      "bad-packfile-uri",
    );
  }
  assertEquals(
    parsePackfileUriLine(`${"cd".repeat(32)} ${CDN_URI}`),
    { hash: "cd".repeat(32), uri: CDN_URI },
    "a SHA-256 repository's pack hash",
  );
  assertThrows(
    () => parsePackfileUriLine(`${FAKE_PACK_HASH.toUpperCase()} ${CDN_URI}`),
    ProtocolError,
  );
});
