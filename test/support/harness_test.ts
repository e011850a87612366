/** Tests of the test harness itself: the origin, fixtures, the file server and the relay. */
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
