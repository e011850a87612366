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
import { startOrigin } from "./origin.ts";

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

Deno.test("origin: stop() mid-response kills backends and is idempotent", async () => {
  const origin = await startOrigin();
  await using dir = await tempDir();
  await origin.createBare("big.git");
  await seedAndPush(`${dir.path}/w`, origin.repoUrl("big.git"), 4_000_000);
  const head = (await git(["rev-parse", "main"], { cwd: `${origin.root}/big.git` })).trim();
  const want = `0032want ${head}\n`;
  const res = await fetch(`${origin.repoUrl("big.git")}/git-upload-pack`, {
    method: "POST",
    headers: { "Content-Type": "application/x-git-upload-pack-request" },
    body: `${want}00000009done\n`,
  });
  assertEquals(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read(); // the response is under way; the rest stays unread
  const marker = `GIT_PROJECT_ROOT=${origin.root}`;
  assert((await processesWithEnv(marker)).length > 0, "a backend is running mid-response");
  await Promise.all([origin.stop(), origin.stop()]);
  await reader.cancel().catch(() => {}); // the connection is gone; only the cleanup matters
  assertEquals(await processesWithEnv(marker), [], "no backend or git child left after stop()");
  await origin.stop();
});

Deno.test("fixtures: default repo has the promised shape and is deterministic", async () => {
  await using origin = await startOrigin();
  const started = performance.now();
  const info = await makeRepo(origin, "fx/default.git");
  const elapsed = performance.now() - started;
  assert(elapsed < 2000, `default fixture made in ${elapsed.toFixed(0)} ms`);
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
