import { assert, assertEquals } from "../../support/assert.ts";
import { UrlSigner } from "../../../src/proxy/core/signing.ts";
import {
  callerTag,
  lfsObjectKey,
  signedLfsUrl,
  splitLfsPath,
  verifyLfsUrl,
} from "../../../src/proxy/lfs/lfs_urls.ts";

const OID = "a".repeat(60) + "0123";
const REPO = { id: "0123456789abcdef0123456789abcdef", path: "x/y.git" };

Deno.test("lfs paths: the repository and what follows info/lfs; nothing else", () => {
  assertEquals(splitLfsPath("/x/y.git/info/lfs/objects/batch"), {
    path: "x/y.git",
    rest: "objects/batch",
  });
  assertEquals(splitLfsPath("/y.git/info/lfs"), { path: "y.git", rest: "" });
  assertEquals(splitLfsPath("/y.git/info/lfsx/objects"), undefined);
  assertEquals(splitLfsPath("/info/lfs/objects/batch"), undefined);
  assertEquals(splitLfsPath("/y.git/info/refs"), undefined);
  assertEquals(lfsObjectKey(OID), `lfs/objects/aa/aa/${OID}`);
  let threw = false;
  try {
    lfsObjectKey("../" + OID.slice(3));
  } catch {
    threw = true;
  }
  assert(threw, "a bad oid makes no key");
});

Deno.test("lfs URLs: the signature binds repository, oid, size, caller and expiry", async () => {
  const signer = new UrlSigner(new Uint8Array(32).fill(7));
  const tag = await callerTag(signer, "Basic YWxpY2U6cHc=");
  assert(tag !== await callerTag(signer, null), "anonymous has its own tag");
  assert(!tag.includes("YWxpY2U6cHc"), "the tag is not the credential");
  const { href, expires } = await signedLfsUrl(signer, "https://e", REPO, OID, 42, tag, 1000, 3600);
  assert(expires >= 4600);
  const url = new URL(href);
  const [, , , id, oid] = url.pathname.split("/");
  const ok = await verifyLfsUrl(signer, id, oid, url.searchParams, 1000);
  assertEquals(ok, {
    ok: true,
    expires,
    size: 42,
    tag,
    oid: OID,
    repoId: REPO.id,
    repoPath: "x/y.git",
  });
  const tampered = (name: string, value: string) => {
    const p = new URLSearchParams(url.searchParams);
    p.set(name, value);
    return p;
  };
  for (
    const [name, value] of [["size", "43"], ["c", "B".repeat(22)], ["r", "z.git"], [
      "exp",
      String(expires + 1),
    ]]
  ) {
    const v = await verifyLfsUrl(signer, id, oid, tampered(name, value), 1000);
    assertEquals(v.ok ? 200 : v.status, 403, `${name} changed`);
  }
  const otherOid = "b".repeat(64);
  assertEquals((await verifyLfsUrl(signer, id, otherOid, url.searchParams, 1000)).ok, false);
  assertEquals((await verifyLfsUrl(signer, id, oid, url.searchParams, expires + 1)).ok, false);
  const bad = await verifyLfsUrl(signer, id, "NOTHEX", url.searchParams, 1000);
  assertEquals(bad.ok ? 200 : bad.status, 404);
});
