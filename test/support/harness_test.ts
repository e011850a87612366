/** Tests of the test harness itself: the origin, fixtures, the file server and the relay. */
import { cachedEntry } from "./fixture_cache.ts";
import {
  addCommits,
  assertSameClone,
  CloneMismatchError,
  makePackFixtures,
  makeRepo,
  refsOf,
} from "./fixtures.ts";
import { git, GitCommandError, tempDir } from "./git.ts";
import { type Origin, startOrigin } from "./origin.ts";
import { startFileServer, startRelay } from "./relay.ts";
import { burstFor, VirtualClock } from "./throttle.ts";
import { withinDeadline } from "./deadline.ts";
import type { TrafficStats } from "./stats.ts";

/** Names of the pack files of a bare repository, sorted. */
async function packNames(bare: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(`${bare}/objects/pack`)) names.push(e.name);
  return names.sort();
}

function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

function assertEquals<T>(actual: T, expected: T, msg = ""): void {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`assertion failed: ${msg}\n  actual:   ${a}\n  expected: ${e}`);
}

async function assertRejects(fn: () => Promise<unknown>, cls: new (...a: never[]) => Error) {
  try {
    await fn();
  } catch (e) {
    assert(e instanceof cls, `expected ${cls.name}, got ${e}`);
    return e;
  }
  throw new Error(`expected ${cls.name} to be thrown`);
}

/** Pids of live processes whose environment contains `needle` (e.g. a GIT_PROJECT_ROOT). */
async function processesWithEnv(needle: string): Promise<number[]> {
  const found: number[] = [];
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    let environ: string;
    try {
      environ = await Deno.readTextFile(`/proc/${entry.name}/environ`);
    } catch {
      continue; // exited meanwhile, or not ours to read
    }
    if (environ.split("\0").includes(needle)) found.push(Number(entry.name));
  }
  return found;
}

/** Makes a small work repo with two commits and pushes it to `url`. */
async function seedAndPush(work: string, url: string, extraBytes = 0): Promise<string> {
  await git(["init", "-q", "-b", "main", work]);
  await Deno.writeTextFile(`${work}/a.txt`, "hello\n");
  await git(["add", "."], { cwd: work });
  await git(["commit", "-qm", "one"], { cwd: work });
  if (extraBytes > 0) {
    await Deno.writeFile(`${work}/blob.bin`, randomBytes(extraBytes));
  }
  await Deno.writeTextFile(`${work}/a.txt`, "hello\nworld\n");
  await git(["add", "."], { cwd: work });
  await git(["commit", "-qm", "two"], { cwd: work });
  await git(["push", "-q", url, "main"], { cwd: work });
  return (await git(["rev-parse", "HEAD"], { cwd: work })).trim();
}

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, i + 65536));
  return out;
}

Deno.test("origin: push, clone over protocol v2 and v0, fsck, stats", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  await origin.createBare("team/repo.git");
  const head = await seedAndPush(`${dir.path}/work`, origin.repoUrl("team/repo.git"), 200_000);
  assert(origin.stats.bytesIn > 200_000, `push body counted: ${origin.stats.bytesIn}`);
  assertEquals(
    (await git(["rev-parse", "main"], { cwd: `${origin.root}/team/repo.git` })).trim(),
    head,
    "pushed ref at origin",
  );

  for (const version of ["2", "0"]) {
    origin.stats.reset();
    const dest = `${dir.path}/clone-v${version}`;
    await git(
      ["-c", `protocol.version=${version}`, "clone", "-q", origin.repoUrl("team/repo.git"), dest],
    );
    assertEquals((await git(["rev-parse", "HEAD"], { cwd: dest })).trim(), head, `v${version}`);
    await git(["fsck", "--full", "--strict"], { cwd: dest });
    const upload = origin.stats.byPath["POST /team/repo.git/git-upload-pack"];
    assert(upload && upload.bytesOut > 200_000, `v${version} pack bytes counted`);
    // v2 spends one POST on ls-refs and one on fetch; v0 gets refs from info/refs.
    assertEquals(upload.requests, version === "2" ? 2 : 1, `v${version} upload-pack requests`);
    assert(origin.stats.bytesOut >= upload.bytesOut, "total includes the pack");
    const requests = origin.stats.byPath["GET /team/repo.git/info/refs"]?.requests;
    assertEquals(requests, 1, `v${version} advertisement requests`);
  }
});

Deno.test("origin: protocol v2 is negotiated when the client asks for it", async () => {
  await using origin = await startOrigin();
  await origin.createBare("r.git");
  const res = await fetch(`${origin.repoUrl("r.git")}/info/refs?service=git-upload-pack`, {
    headers: { "Git-Protocol": "version=2" },
  });
  const text = await res.text();
  assertEquals(res.status, 200);
  assert(text.includes("version 2"), `v2 advertisement: ${text}`);
  assert(text.includes("fetch="), "advertises fetch capabilities");
});

Deno.test("origin: gzip request bodies reach upload-pack inflated", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  await origin.createBare("z.git");
  const head = await seedAndPush(`${dir.path}/w`, origin.repoUrl("z.git"));
  const request = "0014command=ls-refs\n00010009peel\n0000";
  const gz = new Blob([request]).stream().pipeThrough(new CompressionStream("gzip"));
  const res = await fetch(`${origin.repoUrl("z.git")}/git-upload-pack`, {
    method: "POST",
    headers: {
      "Content-Type": "application/x-git-upload-pack-request",
      "Content-Encoding": "gzip",
      "Git-Protocol": "version=2",
    },
    body: new Uint8Array(await new Response(gz).arrayBuffer()),
  });
  const text = await res.text();
  assertEquals(res.status, 200, text);
  assert(text.includes(`${head} refs/heads/main`), `ls-refs answer: ${text}`);
});

Deno.test("origin: missing repositories are 404, bad names are refused", async () => {
  await using origin = await startOrigin();
  const res = await fetch(`${origin.repoUrl("nope.git")}/info/refs?service=git-upload-pack`);
  await res.body?.cancel();
  assertEquals(res.status, 404);
  await assertRejects(() => origin.createBare("../escape.git"), Error);
});

Deno.test("origin: Basic auth refuses without credentials and accepts with them", async () => {
  await using origin = await startOrigin({ requireAuth: { user: "alice", password: "s3cret" } });
  await using dir = await tempDir();
  await origin.createBare("private.git");
  const withCreds = origin.repoUrl("private.git").replace("http://", "http://alice:s3cret@");
  const head = await seedAndPush(`${dir.path}/w`, withCreds);

  const res = await fetch(`${origin.repoUrl("private.git")}/info/refs?service=git-upload-pack`);
  await res.body?.cancel();
  assertEquals(res.status, 401);
  assertEquals(res.headers.get("www-authenticate"), 'Basic realm="origin"');

  await assertRejects(
    () => git(["clone", "-q", origin.repoUrl("private.git"), `${dir.path}/anon`]),
    GitCommandError,
  );
  const wrong = withCreds.replace("s3cret", "nope");
  await assertRejects(
    () => git(["clone", "-q", wrong, `${dir.path}/wrong`]),
    GitCommandError,
  );
  await git(["clone", "-q", withCreds, `${dir.path}/ok`]);
  assertEquals((await git(["rev-parse", "HEAD"], { cwd: `${dir.path}/ok` })).trim(), head);
});

/**
 * Starts a fetch of a 4 MB pack from `origin` and reads one chunk of it; the rest stays unread, as
 * from a client that stopped reading. Returns the reader and the marker of the origin's backends.
 */
async function unreadPack(origin: Origin, dir: string) {
  await origin.createBare("big.git");
  await seedAndPush(`${dir}/w`, origin.repoUrl("big.git"), 4_000_000);
  const head = (await git(["rev-parse", "main"], { cwd: `${origin.root}/big.git` })).trim();
  const line = `want ${head} no-progress\n`;
  const want = (line.length + 4).toString(16).padStart(4, "0") + line;
  const res = await fetch(`${origin.repoUrl("big.git")}/git-upload-pack`, {
    method: "POST",
    headers: { "Content-Type": "application/x-git-upload-pack-request" },
    body: `${want}00000009done\n`,
  });
  assertEquals(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read(); // the response is under way; the rest stays unread
  return { reader, marker: `GIT_PROJECT_ROOT=${origin.root}` };
}

/**
 * Waits until a server has sent at least `min` body bytes and then sends no more for a while: its
 * client does not read, so the socket buffers are full (or the body was all handed over).
 */
async function untilBlocked(stats: TrafficStats, min: number): Promise<void> {
  await withinDeadline(
    (async () => {
      let last = -1;
      let same = 0;
      while (same < 3) {
        await new Promise((r) => setTimeout(r, 100));
        same = stats.bytesOut >= min && stats.bytesOut === last ? same + 1 : 0;
        last = stats.bytesOut;
      }
    })(),
    `the server sending ${min} bytes and then blocking`,
  );
}

Deno.test("origin: stop() mid-response kills backends and is idempotent", async () => {
  const origin = await startOrigin();
  await using dir = await tempDir();
  const { reader, marker } = await unreadPack(origin, dir.path);
  assert((await processesWithEnv(marker)).length > 0, "a backend is running mid-response");
  await Promise.all([origin.stop(), origin.stop()]);
  await reader.cancel().catch(() => {}); // the connection is gone; only the cleanup matters
  assertEquals(await processesWithEnv(marker), [], "no backend or git child left after stop()");
  await origin.stop();
});

Deno.test("origin: stop() does not wait for a client that stopped reading", async () => {
  // The hang issue 21 saw under load: the backend had written the whole pack before stop(), so
  // nothing was left to kill, and a graceful shutdown waited for the test to read the response.
  const origin = await startOrigin();
  await using dir = await tempDir();
  const { reader, marker } = await unreadPack(origin, dir.path);
  await untilBlocked(origin.stats, 1_000_000);
  await withinDeadline(origin.stop(), "origin.stop() with a response its client does not read");
  await reader.cancel().catch(() => {});
  assertEquals(await processesWithEnv(marker), [], "no backend or git child left after stop()");
});

Deno.test("fixtures: default repo has the promised shape and is deterministic", async () => {
  await using origin = await startOrigin();
  const info = await makeRepo(origin, "fx/default.git");
  assertEquals(info.url, origin.repoUrl("fx/default.git"));
  assertEquals(
    Object.keys(info.refs).sort(),
    [
      "HEAD",
      "refs/heads/feature-0",
      "refs/heads/feature-1",
      "refs/heads/main",
      "refs/tags/v1.0",
      "refs/tags/v1.1",
    ],
  );
  const g = (args: string[]) => git(args, { cwd: info.bare }).then((s) => s.trim());
  assertEquals(await g(["cat-file", "-t", "v1.0"]), "tag", "annotated tags");
  assertEquals(await g(["rev-list", "--count", "--merges", "main"]), "2", "feature merges");
  assertEquals(await g(["rev-list", "--count", "main", "--", "history.log"]), "10", "revisions");
  assertEquals(await g(["log", "-1", "--format=%ct", "main"]), String(1_700_000_000 + 14 * 60));
  const packed = Number(/size-pack: (\d+)/.exec(await g(["count-objects", "-v"]))![1]);
  assert(packed > 256 && packed < 1024, `a few hundred KiB, got ${packed} KiB`);

  const again = await makeRepo(origin, "fx/again.git");
  assertEquals(again.refs, info.refs, "same seed, same object ids");
  const other = await makeRepo(origin, "fx/other.git", { seed: 2 });
  assert(other.refs.HEAD !== info.refs.HEAD, "another seed gives other content");
});

Deno.test("fixtures: deep delta chains from deltaFileRevisions", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  const info = await makeRepo(origin, "deltas.git", {
    commits: 1,
    branches: 0,
    tags: 0,
    binaryBytes: 0,
    deltaFileRevisions: 40,
  });
  await git(["clone", "-q", "--bare", info.url, `${dir.path}/c.git`]);
  const packDir = `${dir.path}/c.git/objects/pack`;
  const idx = [...Deno.readDirSync(packDir)].find((e) => e.name.endsWith(".idx"))!;
  const stats = await git(["verify-pack", "-s", `${packDir}/${idx.name}`]);
  const depths = [...stats.matchAll(/chain length = (\d+)/g)].map((m) => Number(m[1]));
  assert(Math.max(...depths) >= 20, `delta chains reach depth ${Math.max(...depths)}`);
});

Deno.test("fixtures: addCommits moves the origin, assertSameClone compares clones", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  const info = await makeRepo(origin, "moving.git", { binaryBytes: 10_000 });
  const a = `${dir.path}/a`;
  const b = `${dir.path}/b`;
  await git(["clone", "-q", info.url, a]);
  await git(["-c", "protocol.version=0", "clone", "-q", info.url, b]);
  await assertSameClone(a, b);

  const added = await addCommits(origin, "moving.git", { commits: 3, tag: "v2.0" });
  assertEquals(
    (await git(["rev-list", "--count", `${info.refs["refs/heads/main"]}..${added.tip}`], {
      cwd: info.bare,
    })).trim(),
    "3",
  );
  assertEquals(added.refs["refs/heads/main"], added.tip);
  assertEquals(
    (await git(["rev-parse", "v2.0^{commit}"], { cwd: info.bare })).trim(),
    added.tip,
    "tag on the new tip",
  );
  assertEquals(added.refs["refs/heads/feature-0"], info.refs["refs/heads/feature-0"]);

  await git(["fetch", "-q", "--tags"], { cwd: a });
  const err = await assertRejects(() => assertSameClone(a, b), CloneMismatchError);
  assert(
    (err as CloneMismatchError).differences.some((d) => d.startsWith("refs/remotes/origin/main")),
    "reports the moved remote-tracking ref",
  );
  await git(["fetch", "-q", "--tags"], { cwd: b });
  await git(["merge", "-q", "--ff-only", "origin/main"], { cwd: a });
  await git(["merge", "-q", "--ff-only", "origin/main"], { cwd: b });
  await assertSameClone(a, b);
  assertEquals((await refsOf(a)).HEAD, added.tip);

  await Deno.writeTextFile(`${b}/README.md`, "changed\n");
  await assertRejects(() => assertSameClone(a, b), CloneMismatchError);
});

Deno.test("fixtures: makePackFixtures writes self-contained, disjoint, named packs", async () => {
  await using dir = await tempDir();
  const packs = await makePackFixtures(`${dir.path}/packs`, {
    count: 3,
    bytesEach: 300_000,
    seed: 7,
  });
  assertEquals(packs.length, 3);
  const seen = new Set<string>();
  for (const pack of packs) {
    assertEquals(pack.path, `${dir.path}/packs/pack-${pack.hash}.pack`);
    assert(Math.abs(pack.size - 300_000) < 3_000, `size ${pack.size} near 300000`);
    // A fresh repository can index it on its own: no thin-pack bases are missing.
    const repo = `${dir.path}/check-${pack.hash}`;
    await git(["init", "-q", "--bare", repo]);
    const out = await git(["index-pack", "--stdin", "--strict"], {
      cwd: repo,
      stdin: await Deno.readFile(pack.path),
    });
    assertEquals(out.trim(), `pack\t${pack.hash}`);
    const idx = `${repo}/objects/pack/pack-${pack.hash}.idx`;
    for (
      const line of (await git(["show-index"], { stdin: await Deno.readFile(idx) })).split("\n")
    ) {
      const id = line.split(" ")[1];
      if (!id) continue;
      assert(!seen.has(id), `object ${id} appears in two packs`);
      seen.add(id);
    }
  }
  const again = await makePackFixtures(`${dir.path}/again`, {
    count: 3,
    bytesEach: 300_000,
    seed: 7,
  });
  assertEquals(again.map((p) => p.hash), packs.map((p) => p.hash), "deterministic");
});

Deno.test("fixtures: targetBytes sizes the pack; big fixtures come from the disk cache", async () => {
  await using origin = await startOrigin();
  const spec = { targetBytes: 17 * 1024 * 1024, seed: 99, branches: 1, tags: 1 };
  const first = await makeRepo(origin, "big-1.git", spec);
  const second = await makeRepo(origin, "big-2.git", spec);
  assertEquals(second.refs, first.refs, "cached copy has the same refs");
  // Copied from the cache, not rebuilt: the very same pack files (names are content hashes).
  assertEquals(await packNames(second.bare), await packNames(first.bare), "same packs");
  const out = await git(["count-objects", "-v"], { cwd: second.bare });
  const kib = Number(/size-pack: (\d+)/.exec(out)![1]);
  assert(Math.abs(kib * 1024 - spec.targetBytes) / spec.targetBytes < 0.1, `pack ${kib} KiB`);
  await git(["fsck", "--full", "--no-progress"], { cwd: second.bare });
});

Deno.test("fixtures: the disk cache builds an entry once, even when asked twice at once", async () => {
  await using dir = await tempDir();
  let builds = 0;
  const build = async (d: string) => {
    builds++;
    await Deno.writeTextFile(`${d}/content`, "built");
  };
  const [e1, e2] = await Promise.all([
    cachedEntry("k1", build, dir.path),
    cachedEntry("k1", build, dir.path),
  ]);
  assertEquals(e1, e2);
  assertEquals(await Deno.readTextFile(`${e1}/content`), "built");
  await cachedEntry("k1", build, dir.path);
  assert(builds <= 2, `built ${builds} times`);
  const before = builds;
  await cachedEntry("k1", build, dir.path);
  assertEquals(builds, before, "a finished entry is reused");
  const leftovers = [...Deno.readDirSync(dir.path)].map((e) => e.name);
  assertEquals(leftovers, ["k1"], "no temp build dirs left");
});

/** Reads a response body, returning the bytes received and the error that ended it, if any. */
async function readAll(res: Response): Promise<{ bytes: Uint8Array; error?: unknown }> {
  const chunks: Uint8Array[] = [];
  let error: unknown;
  try {
    for await (const chunk of res.body!) chunks.push(chunk);
  } catch (e) {
    error = e;
  }
  const bytes = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let at = 0;
  for (const c of chunks) {
    bytes.set(c, at);
    at += c.byteLength;
  }
  return { bytes, error };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && a.every((x, i) => x === b[i]);
}

Deno.test("file server: whole files, ranges, 416, HEAD, ETag, 404, stats", async () => {
  await using dir = await tempDir();
  const content = randomBytes(100_000);
  await Deno.writeFile(`${dir.path}/f.bin`, content);
  await using fs = await startFileServer({ files: { "/packs/f.bin": `${dir.path}/f.bin` } });
  const url = `${fs.url}/packs/f.bin`;

  const whole = await fetch(url);
  assertEquals(whole.status, 200);
  assertEquals(whole.headers.get("content-length"), "100000");
  assertEquals(whole.headers.get("accept-ranges"), "bytes");
  const etag = whole.headers.get("etag");
  assert(etag && /^"[0-9a-f]+-[0-9a-f]+"$/.test(etag), `etag ${etag}`);
  assert(sameBytes((await readAll(whole)).bytes, content), "whole body");

  const cases: [string, number, number][] = [
    ["bytes=10-19", 10, 19],
    ["bytes=99990-", 99990, 99999],
    ["bytes=-5", 99995, 99999],
    ["bytes=99000-200000", 99000, 99999],
  ];
  for (const [range, start, end] of cases) {
    const res = await fetch(url, { headers: { Range: range } });
    assertEquals(res.status, 206, range);
    assertEquals(res.headers.get("content-range"), `bytes ${start}-${end}/100000`, range);
    assertEquals(res.headers.get("etag"), etag);
    assert(sameBytes((await readAll(res)).bytes, content.subarray(start, end + 1)), range);
  }

  const unsat = await fetch(url, { headers: { Range: "bytes=100000-" } });
  await unsat.body?.cancel();
  assertEquals(unsat.status, 416);
  assertEquals(unsat.headers.get("content-range"), "bytes */100000");

  const head = await fetch(url, { method: "HEAD" });
  assertEquals(head.status, 200);
  assertEquals(head.headers.get("content-length"), "100000");

  const missing = await fetch(`${fs.url}/nope`);
  await missing.body?.cancel();
  assertEquals(missing.status, 404);

  assertEquals(fs.stats.byPath["GET /packs/f.bin"].bytesOut, 100_000 + 10 + 10 + 5 + 1000);
  assertEquals(fs.stats.byPath["HEAD /packs/f.bin"].bytesOut, 0);
  assertEquals(fs.stats.requests, 8);
});

/**
 * Checks in virtual time that sending `size` bytes at `rate` took what the cap allows: the
 * burst up front, then exactly `rate` (to within one piece of a quarter burst).
 */
function assertCapped(clock: VirtualClock, size: number, rate: number, what: string): void {
  const burst = burstFor(rate);
  const expectedMs = ((size - burst) / rate) * 1000;
  const pieceMs = (burst / 4 / rate) * 1000;
  assert(
    Math.abs(clock.now() - expectedMs) <= pieceMs,
    `${what}: ${size} bytes took ${clock.now().toFixed(1)} virtual ms, the cap allows ` +
      `${expectedMs.toFixed(1)} ms`,
  );
}

Deno.test("file server: the bandwidth cap holds exactly, in virtual time", async () => {
  await using dir = await tempDir();
  await Deno.writeFile(`${dir.path}/m`, randomBytes(1 << 20));
  const rate = 2_000_000;
  const clock = new VirtualClock();
  await using fs = await startFileServer({
    files: (p) => (p.startsWith("/m") ? `${dir.path}/m` : undefined),
    bytesPerSecond: rate,
    clock,
  });
  const { bytes } = await readAll(await fetch(`${fs.url}/m1`));
  assertEquals(bytes.byteLength, 1 << 20);
  assertCapped(clock, bytes.byteLength, rate, "one response");
});

Deno.test("file server: status, truncate, corrupt, stall faults", async () => {
  await using dir = await tempDir();
  const content = randomBytes(200_000);
  await Deno.writeFile(`${dir.path}/f`, content);
  const clock = new VirtualClock();
  await using fs = await startFileServer({
    files: { "/f": `${dir.path}/f`, "/g": `${dir.path}/f` },
    faults: { "/f": { kind: "status", status: 503, times: 2 } },
    clock,
  });
  const get = (path = "/f", headers: HeadersInit = {}) => fetch(`${fs.url}${path}`, { headers });

  for (const expected of [503, 503, 200]) {
    const res = await get();
    await res.body?.cancel();
    assertEquals(res.status, expected, "status fault for two requests, then normal");
  }

  fs.setFaults({ "/f": { kind: "truncate", afterBytes: 70_000, times: 1 } });
  const cut = await readAll(await get());
  assert(cut.error !== undefined, "truncated body fails on the client");
  assertEquals(cut.bytes.byteLength, 70_000);
  assert(sameBytes(cut.bytes, content.subarray(0, 70_000)), "bytes before the cut are right");
  assert(sameBytes((await readAll(await get())).bytes, content), "next request is whole");

  fs.setFaults({ "*": { kind: "corrupt", atByte: 150_000, times: 2 } });
  const bad = (await readAll(await get("/g"))).bytes;
  assertEquals(bad.byteLength, content.byteLength);
  const diffs = [...bad.keys()].filter((i) => bad[i] !== content[i]);
  assertEquals(diffs, [150_000], "exactly the one byte flipped");
  const badRange = (await readAll(await get("/g", { Range: "bytes=149990-150009" }))).bytes;
  assertEquals(badRange[10], ~content[150_000] & 0xff, "offset is in the file, not the body");
  assert(sameBytes((await readAll(await get("/g"))).bytes, content), "used up");

  fs.setFaults({ "/f": { kind: "stall", afterBytes: 1000, ms: 400, times: 1 } });
  const stalled = await readAll(await get());
  assert(sameBytes(stalled.bytes, content), "stalled body completes intact");
  assertEquals(clock.sleeps, [400], "stalled once, for 400 ms");
});

Deno.test("file server: ignore-range and bad-416 faults", async () => {
  await using dir = await tempDir();
  const content = randomBytes(5000);
  await Deno.writeFile(`${dir.path}/f`, content);
  await using fs = await startFileServer({
    files: { "/f": `${dir.path}/f` },
    faults: { "/f": [{ kind: "ignore-range", times: 1 }, { kind: "bad-416", times: 1 }] },
  });
  const ranged = () => fetch(`${fs.url}/f`, { headers: { Range: "bytes=100-199" } });
  const ignored = await ranged();
  assertEquals(ignored.status, 200);
  assertEquals(ignored.headers.get("content-range"), null);
  assert(sameBytes((await readAll(ignored)).bytes, content), "full body despite Range");
  const refused = await ranged();
  await refused.body?.cancel();
  assertEquals(refused.status, 416, "satisfiable range refused");
  const fine = await ranged();
  assertEquals(fine.status, 206);
  assert(sameBytes((await readAll(fine)).bytes, content.subarray(100, 200)), "then normal");
});

Deno.test("file server: stop() ends a stalled response promptly", async () => {
  await using dir = await tempDir();
  await Deno.writeFile(`${dir.path}/f`, randomBytes(50_000));
  // The stall never ends by itself: only stop() can end the response.
  const clock = new VirtualClock(30_000);
  const fs = await startFileServer({
    files: { "/f": `${dir.path}/f` },
    faults: { "/f": { kind: "stall", afterBytes: 10, ms: 30_000, times: 1 } },
    clock,
  });
  const res = await fetch(`${fs.url}/f`);
  const reading = readAll(res);
  await clock.hung;
  await withinDeadline(fs.stop(), "stop() during an endless stall");
  const { bytes, error } = await reading;
  assert(error !== undefined && bytes.byteLength === 10, "client saw the connection end");
  await fs.stop();
});

Deno.test("file server: stop() does not wait for a client that stopped reading", async () => {
  await using dir = await tempDir();
  await Deno.writeFile(`${dir.path}/f`, randomBytes(32 << 20));
  const fs = await startFileServer({ files: { "/f": `${dir.path}/f` } });
  const res = await fetch(`${fs.url}/f`);
  const reader = res.body!.getReader();
  await reader.read(); // the rest stays unread: the socket buffers fill and the server blocks
  await untilBlocked(fs.stats, 1_000_000);
  assert(fs.stats.bytesOut < 32 << 20, `the server is blocked mid-body: ${fs.stats.bytesOut}`);
  await withinDeadline(fs.stop(), "fileServer.stop() with a response its client does not read");
  await reader.cancel().catch(() => {});
});

Deno.test("relay: git clones through it, counts bytes, caps and injects faults", async () => {
  await using origin = await startOrigin();
  await using dir = await tempDir();
  const info = await makeRepo(origin, "r.git", { binaryBytes: 300_000 });
  await using relay = await startRelay(origin.url, { bytesPerSecond: 4_000_000 });
  const viaRelay = `${relay.url}/r.git`;

  origin.stats.reset();
  await git(["clone", "-q", viaRelay, `${dir.path}/a`]);
  await git(["-c", "protocol.version=0", "clone", "-q", viaRelay, `${dir.path}/b`]);
  await assertSameClone(`${dir.path}/a`, `${dir.path}/b`);
  assertEquals((await refsOf(`${dir.path}/a`)).HEAD, info.refs.HEAD);
  assertEquals(relay.stats.bytesOut, origin.stats.bytesOut, "relay passes bytes through 1:1");
  assertEquals(relay.stats.requests, origin.stats.requests);

  await git(["commit", "-q", "--allow-empty", "-m", "pushed"], { cwd: `${dir.path}/a` });
  await git(["push", "-q", "origin", "main"], { cwd: `${dir.path}/a` });
  assertEquals(
    (await refsOf(info.bare))["refs/heads/main"],
    (await refsOf(`${dir.path}/a`)).HEAD,
    "push through the relay",
  );

  relay.setFaults({ "/r.git/info/refs": { kind: "status", status: 503, times: 1 } });
  await assertRejects(() => git(["clone", "-q", viaRelay, `${dir.path}/c`]), GitCommandError);
  relay.setFaults({ "/r.git/git-upload-pack": { kind: "truncate", afterBytes: 1000, times: 2 } });
  await assertRejects(() => git(["clone", "-q", viaRelay, `${dir.path}/d`]), GitCommandError);
  await git(["clone", "-q", viaRelay, `${dir.path}/e`]);
});

Deno.test("relay: ranges and faults in front of a file server", async () => {
  await using dir = await tempDir();
  const content = randomBytes(64_000);
  await Deno.writeFile(`${dir.path}/f`, content);
  await using fs = await startFileServer({ files: { "/f": `${dir.path}/f` } });
  await using relay = await startRelay(fs.url, {
    faults: {
      "/f": [{ kind: "ignore-range", times: 1 }, { kind: "corrupt", atByte: 1005, times: 1 }],
    },
  });
  const ranged = () => fetch(`${relay.url}/f`, { headers: { Range: "bytes=1000-1999" } });
  const full = await ranged();
  assertEquals(full.status, 200, "Range dropped on the way");
  assert(sameBytes((await readAll(full)).bytes, content), "whole body");
  const corrupt = await ranged();
  assertEquals(corrupt.status, 206);
  assertEquals(corrupt.headers.get("content-range"), "bytes 1000-1999/64000");
  const bytes = (await readAll(corrupt)).bytes;
  assertEquals([...bytes.keys()].filter((i) => bytes[i] !== content[1000 + i]), [5]);
  const normal = await ranged();
  assert(sameBytes((await readAll(normal)).bytes, content.subarray(1000, 2000)), "then normal");
  // `pass` serves as usual, so the `body` after it replaces the second answer only.
  relay.setFaults({ "/f": [{ kind: "pass", times: 1 }, { kind: "body", body: "zz", times: 1 }] });
  const passed = await fetch(`${relay.url}/f`);
  assert(sameBytes((await readAll(passed)).bytes, content), "passed");
  const replaced = await fetch(`${relay.url}/f`);
  assertEquals([replaced.status, await replaced.text()], [200, "zz"], "replaced");
  assert(sameBytes((await readAll(await fetch(`${relay.url}/f`))).bytes, content), "then normal");
});

Deno.test("relay: the cap applies per response in front of another server", async () => {
  await using dir = await tempDir();
  const content = randomBytes(512 * 1024);
  await Deno.writeFile(`${dir.path}/f`, content);
  await using fs = await startFileServer({ files: { "/f": `${dir.path}/f` } });
  const rate = 2_000_000;
  const clock = new VirtualClock();
  await using relay = await startRelay(fs.url, { bytesPerSecond: rate, clock });
  const { bytes } = await readAll(await fetch(`${relay.url}/f`));
  assert(sameBytes(bytes, content), "content intact");
  assertCapped(clock, bytes.byteLength, rate, "relayed response");
  assertEquals(relay.stats.bytesOut, content.byteLength);
});

Deno.test("relay: compressed answers pass through byte for byte; a dead upstream is 502", async () => {
  const text = "packfile-uris ".repeat(500);
  const gz = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  const gzBytes = new Uint8Array(await new Response(gz).arrayBuffer());
  const upstream = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () => new Response(gzBytes, { headers: { "Content-Encoding": "gzip" } }),
  );
  try {
    await using relay = await startRelay(`http://127.0.0.1:${upstream.addr.port}`);
    const res = await fetch(`${relay.url}/x`);
    assertEquals(res.headers.get("content-encoding"), "gzip");
    assertEquals(await res.text(), text, "the client decodes it");
    assertEquals(relay.stats.bytesOut, gzBytes.byteLength, "relayed still compressed");
  } finally {
    await upstream.shutdown();
  }
  await using dead = await startRelay(`http://127.0.0.1:${upstream.addr.port}`);
  const res = await fetch(`${dead.url}/x`);
  await res.body?.cancel();
  assertEquals(res.status, 502);
});
