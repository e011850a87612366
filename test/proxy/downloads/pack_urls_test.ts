import { packPath, signedPackUrl, verifyPackUrl } from "../../../src/proxy/downloads/pack_urls.ts";
import { UrlSigner } from "../../../src/proxy/core/signing.ts";
import { assert, assertEquals } from "../../support/assert.ts";

const signer = new UrlSigner(new TextEncoder().encode("0123456789abcdef0123456789abcdef"));
const ID = "0123456789abcdef0123456789abcdef";
const KEY = `repos/${ID}/packs/pack-1234abcd.pack`;
const NOW = 1_000_000;
const TTL = 3600;

/** The route parameters and query of `url`, as the app hands them to the verifier. */
function parts(url: string): { id: string; file: string; params: URLSearchParams } {
  const u = new URL(url);
  const m = /^\/_edge\/packs\/([^/]+)\/([^/]+)$/.exec(u.pathname);
  assert(m, `pack path: ${u.pathname}`);
  return { id: m[1], file: m[2], params: u.searchParams };
}

async function verdictAt(url: string, now: number) {
  const { id, file, params } = parts(url);
  return await verifyPackUrl(signer, id, file, params, now);
}

Deno.test("pack URLs: a built URL verifies until its expiry, on the pack's path", async () => {
  const url = await signedPackUrl(signer, "https://edge.test", ID, KEY, NOW, TTL);
  assert(url.startsWith(`https://edge.test${packPath(ID, "pack-1234abcd.pack")}?exp=`), url);
  const verdict = await verdictAt(url, NOW);
  assert(verdict.ok, "fresh URL verifies");
  assert(verdict.expires >= NOW + TTL && verdict.expires < NOW + TTL + TTL / 4, "expiry bucket");
  assertEquals(await verdictAt(url, verdict.expires), verdict, "valid up to its expiry");
  assertEquals(await verdictAt(url, verdict.expires + 1), {
    ok: false,
    status: 403,
    message: "pack URL signature is invalid or expired",
  });
  const same = await signedPackUrl(signer, "https://edge.test", ID, KEY, NOW + 1, TTL);
  assertEquals(same, url, "URLs issued close together are identical (cacheable)");
});

Deno.test("pack URLs: tampering with the path, expiry or signature is refused (403)", async () => {
  const url = await signedPackUrl(signer, "https://edge.test", ID, KEY, NOW, TTL);
  const { id, file, params } = parts(url);
  const exp = Number(params.get("exp"));
  const sig = params.get("sig")!;
  const refused = async (
    what: string,
    at: { id?: string; file?: string; exp?: string; sig?: string | null },
  ) => {
    const q = new URLSearchParams({ exp: at.exp ?? String(exp) });
    if (at.sig !== null) q.set("sig", at.sig ?? sig);
    const verdict = await verifyPackUrl(signer, at.id ?? id, at.file ?? file, q, NOW);
    assertEquals(verdict.ok ? 200 : verdict.status, 403, what);
  };
  await refused("another pack", { file: "pack-1234abce.pack" });
  await refused("another repository", { id: "f".repeat(32) });
  await refused("a later expiry", { exp: String(exp + 1) });
  await refused("a non-numeric expiry", { exp: "soon" });
  await refused("a flipped signature", { sig: (sig[0] === "A" ? "B" : "A") + sig.slice(1) });
  await refused("no signature", { sig: null });
  await refused("garbage signature", { sig: "!!" });
  await refused("the signature's first half", { sig: sig.slice(0, sig.length >> 1) });
  await refused("the signature less its last character", { sig: sig.slice(0, -1) });
  const other = new UrlSigner(new TextEncoder().encode("another key of sixteen+ bytes"));
  const foreign = await verifyPackUrl(other, id, file, params, NOW);
  assertEquals(foreign.ok ? 200 : foreign.status, 403, "another edge's key");
  assert((await verifyPackUrl(signer, id, file, params, NOW)).ok, "the untouched URL still works");
});

Deno.test("pack URLs: a path that names no pack is 404 before any signature check", async () => {
  const url = await signedPackUrl(signer, "https://edge.test", ID, KEY, NOW, TTL);
  const { params } = parts(url);
  for (
    const [id, file] of [
      [ID.slice(1), "pack-1.pack"],
      [ID.toUpperCase(), "pack-1.pack"],
      [ID, "pack-1.rev"],
      [ID, "..pack"],
      [ID, "Pack-1.pack"],
    ]
  ) {
    assertEquals(await verifyPackUrl(signer, id, file, params, NOW), {
      ok: false,
      status: 404,
      message: "no such pack",
    }, `${id}/${file}`);
  }
});

Deno.test("pack URLs: a pack's index is authorised by the pack's own signature, same expiry", async () => {
  const url = await signedPackUrl(signer, "https://edge.test", ID, KEY, NOW, TTL);
  const idx = url.replace(/\.pack\?/, ".idx?");
  const verdict = await verdictAt(idx, NOW);
  assert(verdict.ok, "the index URL verifies with the pack's signature");
  assertEquals(await verdictAt(idx, verdict.expires + 1), {
    ok: false,
    status: 403,
    message: "pack URL signature is invalid or expired",
  });
  // Another pack's signature does not open this pack's index.
  const other = await signedPackUrl(
    signer,
    "https://edge.test",
    ID,
    `repos/${ID}/packs/pack-99.pack`,
    NOW,
    TTL,
  );
  const foreign = idx.replace(/\?.*$/, other.slice(other.indexOf("?")));
  assertEquals((await verdictAt(foreign, NOW)).ok, false, "another pack's signature");
  for (const file of ["pack-1234abcd.rev", "pack-1234abcd.idx.pack", "pack-1234abcd.IDX"]) {
    const bad = idx.replace("pack-1234abcd.idx", file);
    assertEquals((await verdictAt(bad, NOW)).ok, false, file);
  }
});
