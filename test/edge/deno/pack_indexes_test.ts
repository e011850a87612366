/**
 * `--pack-indexes` on the Deno server: each snapshot pack's `.idx` is built with `git index-pack`
 * before the manifest names it, is served at the pack's URL with `.idx` for `.pack` under the
 * pack's signature (Range, immutable caching), and only while the setting is on; without git the
 * server refuses to start.
 */
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { makeRepo } from "../../support/fixtures.ts";
import { denoEdgeFactory, type EdgeUnderTest } from "../../support/edge.ts";
import { warm } from "../../proxy/edge_suite.ts";
import { clone } from "../../../src/client/clone.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";

const REPO = "team/r.git";
const SPEC = { commits: 12, branches: 2, tags: 1, binaryBytes: 300_000, deltaFileRevisions: 8 };
const CLI = new URL("../../../edge/deno/cli.ts", import.meta.url).pathname;

async function storedManifest(edge: EdgeUnderTest): Promise<Manifest> {
  const [key] = (await edge.listStored("repos/")).filter((k) => k.endsWith("/manifest.json"));
  return JSON.parse(new TextDecoder().decode(await edge.readStored(key)));
}

/** The pack URIs a clone was handed. */
async function packUris(url: string, dir: string): Promise<string[]> {
  const summary = await clone({ url, directory: `${dir}/c${crypto.randomUUID()}`, bare: true });
  return summary.packs.map((p) => p.uri);
}

function indexUrl(packUri: string): string {
  const u = new URL(packUri);
  u.pathname = u.pathname.replace(/\.pack$/, ".idx");
  return u.href;
}

Deno.test("--pack-indexes: every snapshot pack's .idx is git's own, stored before the manifest names it, served under the pack's signature", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 3, packIndexes: true });
  await makeRepo(origin, REPO, SPEC);
  await warm(edge, REPO);
  const manifest = await storedManifest(edge);
  const packs = manifest.layers.flat();
  assertEquals(packs.length, 3, "three packs");
  for (const pack of packs) {
    assert(pack.index, `${pack.key} has an index in the manifest`);
    assertEquals(pack.index.key, pack.key.replace(/\.pack$/, ".idx"));
    const stored = await edge.readStored(pack.index.key);
    assertEquals(stored.byteLength, pack.index.size, "recorded size");
    // The same index git makes of the same pack.
    const copy = `${dir.path}/${pack.hash}.pack`;
    await Deno.writeFile(copy, await edge.readStored(pack.key));
    await git(["index-pack", "-o", `${dir.path}/${pack.hash}.idx`, copy]);
    assertEquals(stored, await Deno.readFile(`${dir.path}/${pack.hash}.idx`), "git's index");
  }

  const uris = await packUris(`${edge.url}/${REPO}`, dir.path);
  assertEquals(uris.length, 3);
  const byName = new Map(packs.map((p) => [p.key.slice(p.key.lastIndexOf("/") + 1), p]));
  for (const uri of uris) {
    const pack = byName.get(new URL(uri).pathname.split("/").pop()!)!;
    const res = await fetch(indexUrl(uri));
    const body = new Uint8Array(await res.arrayBuffer());
    assertEquals(res.status, 200, "the index under the pack's signature");
    assertEquals(body, await edge.readStored(pack.index!.key), "byte for byte");
    assertMatch(res.headers.get("cache-control") ?? "", /immutable/);
    assertEquals(res.headers.get("content-length"), String(pack.index!.size));
    const range = await fetch(indexUrl(uri), { headers: { range: "bytes=0-7" } });
    assertEquals(range.status, 206, "Range");
    assertEquals(
      new Uint8Array(await range.arrayBuffer()),
      new Uint8Array([0xff, 0x74, 0x4f, 0x63, 0, 0, 0, 2]),
      "the v2 header",
    );
    assertEquals(range.headers.get("content-range"), `bytes 0-7/${pack.index!.size}`);
  }
  // A signature is for its own pack, and for an unchanged expiry.
  const [a, b] = uris;
  const foreign = new URL(indexUrl(a));
  foreign.search = new URL(b).search;
  const refused = await fetch(foreign);
  await refused.body?.cancel();
  assertEquals(refused.status, 403, "another pack's signature");
  const later = new URL(indexUrl(a));
  later.searchParams.set("exp", String(Number(later.searchParams.get("exp")) + 3600));
  const expired = await fetch(later);
  await expired.body?.cancel();
  assertEquals(expired.status, 403, "a changed expiry");
  // An index gone from the store is a 404 (the client falls back to index-pack).
  await edge.deleteStored(byName.get(new URL(a).pathname.split("/").pop()!)!.index!.key);
  const gone = await fetch(indexUrl(a));
  assertEquals(gone.status, 404, await gone.text());
});

Deno.test("without --pack-indexes: no index is built, and an index URL is a 404", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
  await makeRepo(origin, REPO, SPEC);
  await warm(edge, REPO);
  const manifest = await storedManifest(edge);
  assert(manifest.layers.flat().every((p) => p.index === undefined), "no index in the manifest");
  assertEquals((await edge.listStored("repos/")).filter((k) => k.endsWith(".idx")), []);
  for (const uri of await packUris(`${edge.url}/${REPO}`, dir.path)) {
    // Even an index put in the store by hand is not served while the setting is off.
    const key = `repos/${new URL(uri).pathname.split("/")[3]}/packs/${
      new URL(uri).pathname.split("/").pop()!.replace(/\.pack$/, ".idx")
    }`;
    await edge.writeStored(key, new Uint8Array(1100));
    const res = await fetch(indexUrl(uri));
    assertEquals(res.status, 404, await res.text());
  }
});

Deno.test("gitedge serve --pack-indexes on refuses to start without git, naming the setting", async () => {
  await using dir = await tempDir();
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "serve", "--origin", "http://127.0.0.1:9", "--port", "0"],
    cwd: dir.path,
    env: { ...GIT_ENV, PATH: `${dir.path}/no-git-here`, GITEDGE_PACK_INDEXES: "on" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assertEquals(out.code, 2, stderr);
  assertMatch(stderr, /--pack-indexes needs git/);
});
