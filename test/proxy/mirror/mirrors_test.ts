/**
 * `Mirrors` (src/proxy/mirror/mirrors.ts): seeding and updates single-flight per repository over a
 * host (a stand-in here; the git one is tested end to end in test/edge/deno/mirror_test.ts).
 */
import { assertEquals } from "../../support/assert.ts";
import { type MirrorAnswer, type MirrorHost, Mirrors } from "../../../src/proxy/mirror/mirrors.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";
import type { OriginAuth, RepoRef } from "../../../src/proxy/core/repo.ts";

const REPO: RepoRef = { id: "ab", originUrl: "https://git.test/r.git", path: "r.git" };
const AUTH: OriginAuth = { headers: {} };
const MANIFEST = { tips: {}, layers: [] } as unknown as Manifest;

/** A host whose objects are a set; updates add `origin`'s objects after `release` is called. */
class FakeHost implements MirrorHost {
  seeded = false;
  objects = new Set<string>();
  origin = new Set<string>();
  seeds = 0;
  updates = 0;
  failUpdate = false;
  gate = Promise.withResolvers<void>();
  exists() {
    return Promise.resolve(this.seeded);
  }
  missing(_: RepoRef, oids: readonly string[]) {
    return Promise.resolve(oids.filter((o) => !this.objects.has(o)));
  }
  async seed() {
    this.seeds++;
    await this.gate.promise;
    this.seeded = true;
  }
  async update() {
    this.updates++;
    await this.gate.promise;
    if (this.failUpdate) throw new Error("killed");
    for (const o of this.origin) this.objects.add(o);
  }
  serve(): Promise<MirrorAnswer> {
    return Promise.resolve({ ok: false, reason: "unused" });
  }
  discard() {
    this.seeded = false;
    this.objects.clear();
    return Promise.resolve();
  }
  size() {
    return Promise.resolve(this.seeded ? 1 : 0);
  }
}

Deno.test("mirrors: concurrent requests share one seed and one update; each gets its wants", async () => {
  const host = new FakeHost();
  host.origin = new Set(["a", "b", "c"]);
  const mirrors = new Mirrors(host, () => 5);
  const wants = [["a"], ["b"], ["a", "c"], ["c"], ["b", "a"]];
  const all = Promise.all(
    wants.map((w) => mirrors.ensure(REPO, w, AUTH, () => Promise.resolve(MANIFEST))),
  );
  await new Promise((r) => setTimeout(r, 10));
  host.gate.resolve();
  const results = await all;
  assertEquals(host.seeds, 1);
  assertEquals(host.updates, 1);
  for (const r of results) assertEquals(r.ready, true);
  assertEquals((await mirrors.status(REPO)).updatedAt, 5);
  // Held wants cost nothing.
  assertEquals(await mirrors.ensure(REPO, ["a"], AUTH, () => Promise.resolve(null)), {
    ready: true,
    updated: false,
  });
  assertEquals(host.updates, 1);
});

Deno.test("mirrors: no snapshot, a failed update or a want the origin lacks: not ready", async () => {
  const host = new FakeHost();
  host.gate.resolve();
  const mirrors = new Mirrors(host);
  assertEquals(
    await mirrors.ensure(REPO, ["a"], AUTH, () => Promise.resolve(null)),
    { ready: false, reason: "no snapshot to seed" },
  );
  host.origin = new Set(["a"]);
  assertEquals(
    (await mirrors.ensure(REPO, ["z"], AUTH, () => Promise.resolve(MANIFEST))).ready,
    false,
  );
  host.failUpdate = true;
  const failed = await mirrors.ensure(REPO, ["b"], AUTH, () => Promise.resolve(MANIFEST));
  assertEquals(failed, { ready: false, reason: "update failed: killed" });
  assertEquals(mirrors.updateFailures, 1);
});
