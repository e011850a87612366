import { assert, assertEquals, assertThrows } from "../support/assert.ts";
import { ProtocolError } from "../../src/git/errors.ts";
import { hashLength, isObjectId, requireOid } from "../../src/git/object_id.ts";

Deno.test("object ids: full lower-case SHA-1 or SHA-256 hex only", () => {
  const sha1 = "0123456789abcdef0123456789abcdef01234567";
  const sha256 = "ab".repeat(32);
  assert(isObjectId(sha1) && isObjectId(sha256));
  for (
    const bad of [
      "",
      sha1.slice(1),
      sha1 + "0",
      sha1.toUpperCase(),
      sha256.slice(2),
      "g".repeat(40),
      ` ${sha1}`,
      `${sha1}\n`,
    ]
  ) {
    assert(!isObjectId(bad), JSON.stringify(bad));
  }
  assertEquals(requireOid(sha1, "want"), sha1);
  const err = assertThrows(() => requireOid("XYZ", "want"), ProtocolError, "want:");
  assertEquals(err.code, "bad-oid");
  assertEquals([hashLength("sha1"), hashLength("sha256")], [20, 32]);
});
