/**
 * `Mirrors.ensure` around the update (src/proxy/mirror/mirrors.ts): what a request does after
 * joining a run that was not for its wants, or that failed with another caller's credential, and
 * when a mirror counts as damaged. A stand-in host whose updates bring only what they were asked.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import {
  type MirrorAnswer,
  MirrorDamagedError,
  type MirrorHost,
  Mirrors,
  type UpdateHint,
} from "../../../src/proxy/mirror/mirrors.ts";
import type { Manifest } from "../../../src/proxy/core/manifest.ts";
import type { OriginAuth, RepoRef } from "../../../src/proxy/core/repo.ts";

const REPO: RepoRef = { id: "cd", originUrl: "https://git.test/r.git", path: "r.git" };
const MANIFEST = { tips: {}, layers: [] } as unknown as Manifest;
const auth = (who: string): OriginAuth => ({ headers: { authorization: who } });

/** Objects are a set; an update brings the wants the origin has, for an accepted credential. */
class AskedHost implements MirrorHost {
  objects = new Set<string>();
  origin = new Set<string>();
  /** Objects the host claims but cannot read after an update (a damaged pack). */
  unreadable = new Set<string>();
  accepted = "good";
  /** An update that finds the mirror cannot read itself. */
  damaged = false;
  calls: { who: string; oids: string[]; refs: boolean }[] = [];
  discarded = 0;
  gate = Promise.withResolvers<void>();
  present = true;
  exists() {
    return Promise.resolve(this.present);
  }
  /** While set, `missing` waits for it. */
  missingGate: Promise<void> | null = null;
  async missing(_: RepoRef, oids: readonly string[]) {
    if (this.missingGate) await this.missingGate;
    return oids.filter((o) => !this.objects.has(o) || this.unreadable.has(o));
  }
  seed() {
    return Promise.resolve();
  }
  async update(_: RepoRef, a: OriginAuth, oids: readonly string[], hint: UpdateHint = {}) {
    const who = a.headers.authorization ?? "";
    this.calls.push({ who, oids: [...oids], refs: hint.refs !== undefined });
    await this.gate.promise;
    if (!this.present) throw new Error("no mirror");
    if (this.damaged) throw new MirrorDamagedError("cannot read its tips");
    if (who !== this.accepted) {
      hint.onOriginStatus?.(401);
      throw new Error("origin answered 401 to fetch");
    }
    for (const o of oids) if (this.origin.has(o)) this.objects.add(o);
    hint.onOriginStatus?.(200);
  }
  pack(): Promise<ReadableStream<Uint8Array>> {
    return Promise.reject(new Error("unused"));
  }
  serve(): Promise<MirrorAnswer> {
    return Promise.resolve({ ok: false, reason: "unused" });
  }
  discard() {
    this.discarded++;
    this.present = false;
    return Promise.resolve();
  }
  size() {
    return Promise.resolve(1);
  }
  list() {
    return Promise.resolve([{ id: REPO.id, bytes: 1 }]);
  }
}

Deno.test("mirror update: a request that joined another caller's update for other wants runs its own, and the mirror is not taken for damaged", async () => {
  const host = new AskedHost();
  host.origin = new Set(["a", "b"]);
  const mirrors = new Mirrors(host);
  const first = mirrors.ensure(REPO, ["a"], auth("good"), () => Promise.resolve(MANIFEST));
  await Promise.resolve();
  const second = mirrors.ensure(REPO, ["b"], auth("good"), () => Promise.resolve(MANIFEST));
  host.gate.resolve();
  assertEquals(await first, { ready: true, updated: true });
  assertEquals(await second, { ready: true, updated: true });
  assertEquals(host.calls.map((c) => c.oids), [["a"], ["b"]]);
  assertEquals(host.discarded, 0);
});

for (const syncAs of ["good", "wrong"]) {
  Deno.test(`mirror update: a request that, after waiting for one update, joins a sync of refs (no wants of its own; as a ${syncAs} credential) runs its own update next; the mirror is not taken for damaged`, async () => {
    const host = new AskedHost();
    host.origin = new Set(["a", "b"]);
    const mirrors = new Mirrors(host);
    const manifest = () => Promise.resolve(MANIFEST);
    const a = mirrors.ensure(REPO, ["a"], auth("good"), manifest);
    await tick();
    const b = mirrors.ensure(REPO, ["b"], auth("good"), manifest);
    await tick();
    // B waits for A's update; its next look at the mirror is held while a sync of refs starts.
    const held = Promise.withResolvers<void>();
    host.missingGate = held.promise;
    const firstGate = host.gate;
    host.gate = Promise.withResolvers<void>();
    firstGate.resolve();
    await tick();
    const sync = mirrors.syncRefs(REPO, { "refs/heads/main": "a" }, auth(syncAs));
    await tick();
    host.missingGate = null;
    held.resolve();
    await tick();
    host.gate.resolve();
    await sync;
    assertEquals(await a, { ready: true, updated: true });
    assertEquals(await b, { ready: true, updated: true });
    assertEquals(host.calls.map((c) => c.oids), [["a"], [], ["b"]]);
    assertEquals(host.discarded, 0);
  });
}

/** Lets pending promise callbacks run. */
const tick = () => new Promise((r) => setTimeout(r, 5));

Deno.test("mirror update: a request that joined a refused caller's update runs its own with its credential; the refused one is told 401", async () => {
  const host = new AskedHost();
  host.origin = new Set(["a"]);
  const mirrors = new Mirrors(host);
  const verdicts: [string, number][] = [];
  const ensure = (who: string) =>
    mirrors.ensure(REPO, ["a"], auth(who), () => Promise.resolve(MANIFEST), {
      onOriginStatus: (status) => verdicts.push([who, status]),
    });
  const wrong = ensure("wrong");
  await Promise.resolve();
  const good = ensure("good");
  host.gate.resolve();
  const w = await wrong;
  assert(!w.ready && w.reason.startsWith("update failed"), JSON.stringify(w));
  assertEquals(await good, { ready: true, updated: true });
  assertEquals(host.calls.map((c) => c.who), ["wrong", "good"]);
  assertEquals(verdicts, [["wrong", 401], ["good", 200]]);
  assertEquals(host.discarded, 0);
});

Deno.test("mirror update: a want still unreadable after the request's own whole update: the mirror is discarded, not served", async () => {
  const host = new AskedHost();
  host.origin = new Set(["a"]);
  host.unreadable = new Set(["a"]);
  host.gate.resolve();
  const mirrors = new Mirrors(host);
  const r = await mirrors.ensure(REPO, ["a"], auth("good"), () => Promise.resolve(MANIFEST));
  assert(!r.ready && r.reason.includes("discarded"), JSON.stringify(r));
  assertEquals(host.discarded, 1);
});

Deno.test("mirror update: the listing noted for a repository names the next update's refs, once and while recent", async () => {
  const host = new AskedHost();
  host.origin = new Set(["a", "b", "c"]);
  host.gate.resolve();
  let now = 1_000;
  const mirrors = new Mirrors(host, { now: () => now });
  mirrors.noteListing(REPO, { "refs/heads/main": "a" });
  await mirrors.ensure(REPO, ["a"], auth("good"), () => Promise.resolve(MANIFEST));
  await mirrors.ensure(REPO, ["b"], auth("good"), () => Promise.resolve(MANIFEST));
  mirrors.noteListing(REPO, { "refs/heads/main": "c" });
  now += 61_000;
  await mirrors.ensure(REPO, ["c"], auth("good"), () => Promise.resolve(MANIFEST));
  assertEquals(host.calls.map((c) => c.refs), [true, false, false]);
});

Deno.test("mirror update: listings are kept for 256 repositories at most, the oldest dropped first", async () => {
  const host = new AskedHost();
  host.origin = new Set(["a"]);
  host.gate.resolve();
  const mirrors = new Mirrors(host);
  const repo = (i: number): RepoRef => ({ ...REPO, id: i.toString(16).padStart(4, "0") });
  for (let i = 0; i < 257; i++) mirrors.noteListing(repo(i), { "refs/heads/main": "a" });
  await mirrors.ensure(repo(0), ["a"], auth("good"), () => Promise.resolve(MANIFEST));
  host.objects.clear();
  await mirrors.ensure(repo(1), ["a"], auth("good"), () => Promise.resolve(MANIFEST));
  assertEquals(host.calls.map((c) => c.refs), [false, true]);
});

Deno.test("mirror update: an update that finds the mirror unreadable: discarded by that request, once; a request that joined it is not ready", async () => {
  const host = new AskedHost();
  host.origin = new Set(["a"]);
  host.damaged = true;
  const mirrors = new Mirrors(host);
  const manifest = () => Promise.resolve(MANIFEST);
  const first = mirrors.ensure(REPO, ["a"], auth("good"), manifest);
  await tick();
  const second = mirrors.ensure(REPO, ["a"], auth("good"), manifest);
  host.gate.resolve();
  const [r1, r2] = await Promise.all([first, second]);
  assert(!r1.ready && r1.reason.includes("discarded"), JSON.stringify(r1));
  assert(!r2.ready, JSON.stringify(r2));
  assertEquals(host.discarded, 1);
});

Deno.test("mirror update: a listing the same as the one last set costs the mirror no work; another listing, or one after a discard, is set", async () => {
  const host = new AskedHost();
  host.origin = new Set(["a", "b"]);
  host.gate.resolve();
  const mirrors = new Mirrors(host);
  const one = { "refs/heads/main": "a" };
  // An update named by the listing sets it; the same listing again (the next runner's) is a no-op.
  await mirrors.ensure(REPO, ["a"], auth("good"), () => Promise.resolve(MANIFEST), { refs: one });
  await mirrors.syncRefs(REPO, { ...one }, auth("good"));
  assertEquals(host.calls.length, 1);
  host.objects.add("b");
  await mirrors.syncRefs(REPO, { "refs/heads/main": "b" }, auth("good"));
  await mirrors.syncRefs(REPO, { "refs/heads/main": "b" }, auth("good"));
  assertEquals(host.calls.length, 2);
  await mirrors.discard(REPO.id);
  host.present = true;
  await mirrors.syncRefs(REPO, { "refs/heads/main": "b" }, auth("good"));
  assertEquals(host.calls.length, 3);
});
