import { expiryFor, UrlSigner } from "../../../src/proxy/core/signing.ts";
import { assert, assertEquals } from "../../support/assert.ts";

const key = new TextEncoder().encode("0123456789abcdef0123456789abcdef");

Deno.test("signed URLs verify until they expire and only for their path", async () => {
  const s = new UrlSigner(key);
  const sig = await s.sign("/_edge/packs/a/b.pack", 2000);
  assert(await s.verify("/_edge/packs/a/b.pack", 2000, sig, 1999), "valid before expiry");
  assert(!(await s.verify("/_edge/packs/a/b.pack", 2000, sig, 2001)), "expired");
  assert(!(await s.verify("/_edge/packs/a/c.pack", 2000, sig, 1000)), "other path");
  assert(!(await s.verify("/_edge/packs/a/b.pack", 2001, sig, 1000)), "other expiry");
  assert(!(await s.verify("/_edge/packs/a/b.pack", 2000, "!!", 1000)), "garbage signature");
  // Only the whole signature: none of its prefixes (one character short, or four: 3 bytes), nor
  // the signature with one more character.
  for (const cut of [1, 4, sig.length - 1]) {
    const prefix = sig.slice(0, sig.length - cut);
    assert(!(await s.verify("/_edge/packs/a/b.pack", 2000, prefix, 1000)), `prefix ${prefix}`);
  }
  assert(!(await s.verify("/_edge/packs/a/b.pack", 2000, `${sig}A`, 1000)), "one more character");
  const other = new UrlSigner(new TextEncoder().encode("another key of sixteen+ bytes"));
  assert(!(await other.verify("/_edge/packs/a/b.pack", 2000, sig, 1000)), "other key");
});

Deno.test("expiry is bucketed so nearby URLs are identical, and never shorter than the TTL", () => {
  assertEquals(expiryFor(1000, 3600), expiryFor(1001, 3600), "same bucket");
  for (const now of [0, 1, 899, 900, 12345]) {
    const e = expiryFor(now, 3600);
    assert(e >= now + 3600 && e < now + 3600 + 900, `expiry for ${now}: ${e}`);
  }
});
