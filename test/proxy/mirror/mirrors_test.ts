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
  pack(): Promise<ReadableStream<Uint8Array>> {
    return Promise.reject(new Error("unused"));
  }
  discard() {
    this.seeded = false;
    this.objects.clear();
    return Promise.resolve();
  }
  size() {
    return Promise.resolve(this.seeded ? 1 : 0);
  }
  list() {
    return Promise.resolve(this.seeded ? [{ id: REPO.id, bytes: 1 }] : []);
  }
}

Deno.test("mirrors: concurrent requests share one seed and one update; each gets its wants", async () => {
  const host = new FakeHost();
  host.origin = new Set(["a", "b", "c"]);
  const mirrors = new Mirrors(host, { now: () => 5 });
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

/** Mirrors of several repositories, `bytes` each; serves a two-chunk answer. */
class SizedHost implements MirrorHost {
  have = new Map<string, number>();
  discarded: string[] = [];
  constructor(readonly bytes: number) {}
  exists(repo: RepoRef) {
    return Promise.resolve(this.have.has(repo.id));
  }
  missing() {
    return Promise.resolve([]);
  }
  seed(repo: RepoRef) {
    this.have.set(repo.id, this.bytes);
    return Promise.resolve();
  }
  update() {
    return Promise.resolve();
  }
  serve(): Promise<MirrorAnswer> {
    const chunks = [new Uint8Array(3), new Uint8Array(4)];
    return Promise.resolve({ ok: true, body: ReadableStream.from(chunks) });
  }
  pack(): Promise<ReadableStream<Uint8Array>> {
    return Promise.reject(new Error("unused"));
  }
  discard(id: string) {
    this.discarded.push(id);
    this.have.delete(id);
    return Promise.resolve();
  }
  size(repo: RepoRef) {
    return Promise.resolve(this.have.get(repo.id) ?? 0);
  }
  list() {
    return Promise.resolve([...this.have].map(([id, bytes]) => ({ id, bytes })));
  }
}

const repo = (id: string): RepoRef => ({ id, originUrl: `https://git.test/${id}`, path: id });

Deno.test("mirrors: over their cap, the least recently used go after a seed, never the one just seeded", async () => {
  const host = new SizedHost(10);
  let now = 0;
  const mirrors = new Mirrors(host, { now: () => now, maxBytes: 25 });
  const seed = () => Promise.resolve(MANIFEST);
  for (const id of ["a1", "b2", "c3"]) {
    now++;
    await mirrors.ensure(repo(id), ["x"], AUTH, seed);
  }
  assertEquals(host.discarded, ["a1"]);
  now++;
  await mirrors.ensure(repo("b2"), ["x"], AUTH, seed); // b2 used again: c3 is now the oldest
  await mirrors.ensure(repo("d4"), ["x"], AUTH, seed);
  assertEquals(host.discarded, ["a1", "c3"]);
  assertEquals(mirrors.evictions, 2);
});

Deno.test("mirrors: at most maxServes answers at once; one ends, another may start; bytes counted", async () => {
  const host = new SizedHost(1);
  const mirrors = new Mirrors(host, { maxServes: 1 });
  const first = await mirrors.serve(repo("a1"), new Uint8Array());
  assertEquals(first?.ok, true);
  assertEquals(await mirrors.serve(repo("a1"), new Uint8Array()), null);
  if (first?.ok) await new Response(first.body).arrayBuffer();
  const third = await mirrors.serve(repo("a1"), new Uint8Array());
  assertEquals(third?.ok, true);
  if (third?.ok) await third.body.cancel();
  assertEquals((await mirrors.serve(repo("a1"), new Uint8Array()))?.ok, true);
  assertEquals(mirrors.servedBytes, 7);
  assertEquals(mirrors.served, 3);
});

Deno.test("mirrors: a host failing under the request (a mirror discarded meanwhile) is not ready, never a throw", async () => {
  const host = new SizedHost(1);
  host.missing = () => Promise.reject(new Error("cat-file: not a git repository"));
  const mirrors = new Mirrors(host);
  const result = await mirrors.ensure(repo("a1"), ["x"], AUTH, () => Promise.resolve(MANIFEST));
  assertEquals(result, { ready: false, reason: "cat-file: not a git repository" });
});
