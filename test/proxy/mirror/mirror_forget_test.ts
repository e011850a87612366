/**
 * `Mirrors.forget` (src/proxy/mirror/mirrors.ts): a mirror dropped because the origin dropped
 * objects is never seeded again from a snapshot built before the one that noticed.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { type MirrorAnswer, type MirrorHost, Mirrors } from "../../../src/proxy/mirror/mirrors.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";
import type { RepoRef } from "../../../src/proxy/core/repo.ts";

const repo: RepoRef = { id: "ab", path: "r.git", originUrl: "http://127.0.0.1:9/r.git" };

function manifest(builtAt: number): Manifest {
  return {
    version: 1,
    originUrl: repo.originUrl,
    tips: { "refs/heads/main": "a".repeat(40) },
    layers: [],
    builtAt,
  };
}

/** A host that records which snapshot each seed came from. */
class SeedingHost implements MirrorHost {
  seededFrom: number[] = [];
  has = false;
  exists() {
    return Promise.resolve(this.has);
  }
  missing() {
    return Promise.resolve([]);
  }
  seed(_: RepoRef, m: Manifest) {
    this.seededFrom.push(m.builtAt);
    this.has = true;
    return Promise.resolve();
  }
  update() {
    return Promise.resolve();
  }
  serve(): Promise<MirrorAnswer> {
    return Promise.resolve({ ok: false, reason: "unused" });
  }
  pack(): Promise<ReadableStream<Uint8Array>> {
    return Promise.reject(new Error("unused"));
  }
  discard() {
    this.has = false;
    return Promise.resolve();
  }
  size() {
    return Promise.resolve(this.has ? 1 : 0);
  }
  list() {
    return Promise.resolve(this.has ? [{ id: repo.id, bytes: 1 }] : []);
  }
}

Deno.test("mirror forget: after a forget for the snapshot built at 200, no seed from an older one; from it, yes", async () => {
  const host = new SeedingHost();
  const mirrors = new Mirrors(host);
  await mirrors.seedFrom(repo, manifest(100));
  assertEquals(host.seededFrom, [100]);
  assert(await mirrors.forget(repo, 200), "there was a mirror");
  assertEquals(host.has, false, "discarded");
  // A fetch in the moment before the coordinator names the new snapshot: no seed from the old.
  const ready = await mirrors.ensure(
    repo,
    ["b".repeat(40)],
    { headers: {} },
    () => Promise.resolve(manifest(100)),
  );
  assertEquals(ready.ready, false);
  await mirrors.seedFrom(repo, manifest(100));
  assertEquals(host.seededFrom, [100], "not seeded from the old snapshot");
  await mirrors.seedFrom(repo, manifest(200));
  assertEquals(host.seededFrom, [100, 200], "seeded from the new one");
  assertEquals(await mirrors.forget(repo), true);
  assertEquals(await mirrors.forget(repo), false, "nothing left to forget");
});
