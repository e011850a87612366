/**
 * The git mirror bounded and self-healing (docs/mirror.md "Damage, disk, eviction"): it goes with
 * its repository when purged and drops what the origin dropped; a damaged or incomplete mirror is
 * discarded and never served or packed from; a killed update leaves the previous mirror serving.
 * Every clone is compared with a direct one at a real `git http-backend` origin.
 */
import { assert, assertEquals, assertRejects } from "../../support/assert.ts";
import { git, GitCommandError, tempDir } from "../../support/git.ts";
import { type Origin, startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo, refsOf } from "../../support/fixtures.ts";
import {
  type MirrorEdge,
  type MirrorEdgeOptions,
  startMirrorEdge,
} from "../../support/mirror_edge.ts";
import { URI_CLONE, warm } from "../../proxy/edge_suite.ts";
import { tracedGit, urisFetched } from "../../support/traced_git.ts";
import { pushCommits } from "../../support/pushed.ts";
import { startRelay } from "../../support/relay.ts";

const REPO = "l.git";
const TOKEN = "heal-t0ken";
const ADMIN = { authorization: `Bearer ${TOKEN}` };

const mirrorEdge = (origin: string, opts: MirrorEdgeOptions = {}) =>
  startMirrorEdge({ origin, chunks: 2, adminToken: TOKEN, ...opts });

async function metric(edgeUrl: string, line: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`, { headers: ADMIN })).text();
  return Number(text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1] ?? 0);
}

/** The mirror directories (`<id>.git`) under `dir`. */
function mirrorDirs(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)].filter((d) => d.name.endsWith(".git")).map((d) =>
      `${dir}/${d.name}`
    );
  } catch {
    return [];
  }
}

/**
 * The repository with a branch `secret` holding a file no other ref reaches; returns its commit.
 */
async function withSecret(origin: Origin, dir: string): Promise<string> {
  await makeRepo(origin, REPO, { commits: 6 });
  const work = `${dir}/secret-work`;
  await git(["clone", "-q", `${origin.root}/${REPO}`, work]);
  await git(["checkout", "-q", "-b", "secret"], { cwd: work });
  await Deno.writeTextFile(`${work}/secret.txt`, "AKIA-not-for-anyone-0815\n");
  await git(["add", "secret.txt"], { cwd: work });
  await git(["commit", "-q", "-m", "oops"], { cwd: work });
  await git(["push", "-q", "origin", "secret"], { cwd: work });
  return (await git(["rev-parse", "HEAD"], { cwd: work })).trim();
}

/** Removes the branch `secret` at the origin and every object only it reached. */
async function dropSecret(origin: Origin): Promise<void> {
  const bare = `${origin.root}/${REPO}`;
  await git(["update-ref", "-d", "refs/heads/secret"], { cwd: bare });
  await git(["reflog", "expire", "--expire=now", "--all"], { cwd: bare });
  await git(["gc", "-q", "--prune=now"], { cwd: bare });
}

/** Whether a fetch of `oid` by id through `url` gets it. */
async function fetchesById(url: string, oid: string, dir: string): Promise<boolean> {
  const d = `${dir}/byid-${crypto.randomUUID().slice(0, 8)}`;
  await git(["init", "-q", "--bare", d]);
  try {
    await git(["fetch", "-q", url, oid], { cwd: d });
  } catch (error) {
    if (error instanceof GitCommandError) return false;
    throw error;
  }
  return true;
}

Deno.test("mirror heal: a purge takes the repository's mirror: an object the origin dropped is not fetched by id from it", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge(origin.url);
  const secret = await withSecret(origin, dir.path);
  await warm(e, REPO, ADMIN);
  await e.edge.idle();
  assertEquals(mirrorDirs(e.mirrors).length, 1, "seeded");
  await dropSecret(origin);
  assert(!await fetchesById(origin.repoUrl(REPO), secret, dir.path), "gone at the origin");
  const res = await fetch(`${e.url}/_edge/purge/${REPO}`, { method: "POST", headers: ADMIN });
  const body = await res.json();
  assertEquals(res.status, 200, JSON.stringify(body));
  assert(!await fetchesById(`${e.url}/${REPO}`, secret, dir.path), "not from the edge either");
  assertEquals(body.purged.mirror, true, JSON.stringify(body));
  assertEquals(mirrorDirs(e.mirrors), [], "the mirror went with the purge");
  // Clones go on, equal to direct ones.
  await git(["clone", "-q", "--bare", origin.repoUrl(REPO), `${dir.path}/direct`]);
  await git(["clone", "-q", "--bare", `${e.url}/${REPO}`, `${dir.path}/after`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/after`);
});

Deno.test("mirror heal: a refresh that finds a ref deleted at the origin drops the mirror's copy: the secret is not fetched by id from the edge", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge(origin.url);
  const secret = await withSecret(origin, dir.path);
  await warm(e, REPO, ADMIN);
  await e.edge.idle();
  await dropSecret(origin);
  // The refresh: a full build (the previous snapshot held the dropped objects).
  await warm(e, REPO, ADMIN);
  await e.edge.idle();
  assert(!await fetchesById(`${e.url}/${REPO}`, secret, dir.path), "the secret from the edge");
  // The mirror is seeded again from the new snapshot and answers fetches of what is there.
  const main = (await git(["rev-parse", "main"], { cwd: `${origin.root}/${REPO}` })).trim();
  const before = await metric(e.url, 'gitedge_mirror_total{result="hit"}');
  assert(await fetchesById(`${e.url}/${REPO}`, main, dir.path), "main's tip");
  assertEquals(await metric(e.url, 'gitedge_mirror_total{result="hit"}'), before + 1, "mirror");
  await git(["clone", "-q", "--bare", origin.repoUrl(REPO), `${dir.path}/direct`]);
  await git([...URI_CLONE, "--bare", `${e.url}/${REPO}`, `${dir.path}/uri`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/uri`);
});

/** The mirror's newest `.pack` (an update's) and the others, by modification time. */
function packsByAge(mirror: string): string[] {
  const dir = `${mirror}/objects/pack`;
  return [...Deno.readDirSync(dir)].filter((f) => f.name.endsWith(".pack"))
    .map((f) => `${dir}/${f.name}`)
    .sort((a, b) => Deno.statSync(a).mtime!.getTime() - Deno.statSync(b).mtime!.getTime());
}

Deno.test("mirror heal: a corrupted mirror (an update's pack garbled; an object removed) is discarded, never packed into a layer or served; clones equal direct ones", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge(origin.url);
  await makeRepo(origin, REPO, { commits: 8 });
  await warm(e, REPO, ADMIN);
  await e.edge.idle();
  const pushed = await pushCommits(origin, REPO, dir.path);
  // The mirror's update brings the new objects (a pack of their own) for a depth-1 clone.
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/shallow`]);
  const [mirror] = mirrorDirs(e.mirrors);
  const newBlob =
    (await git(["rev-parse", `${pushed.tip}:pushed-${pushed.old.slice(0, 8)}-1.bin`], {
      cwd: mirror,
    })).trim();
  // A small update is kept as loose objects (git's unpackLimit), a larger one as a pack.
  const loose = `${mirror}/objects/${newBlob.slice(0, 2)}/${newBlob.slice(2)}`;
  const update = (await Deno.stat(loose).catch(() => null)) ? loose : packsByAge(mirror).at(-1)!;
  // Bit rot in the middle of the new objects (a new file: never the store's).
  const bytes = Deno.readFileSync(update);
  for (let i = 0; i < 16; i++) bytes[(bytes.length >> 1) + i] ^= 0x5a;
  Deno.removeSync(update);
  Deno.writeFileSync(update, bytes);
  // The refresh: the mirror cannot pack the new objects (git checks the entries it copies), so
  // it is discarded and the layer comes from the origin.
  await warm(e, REPO, ADMIN);
  await e.edge.idle();
  assertEquals(await metric(e.url, "gitedge_mirror_layers_total"), 0, "no layer from the mirror");
  assert(await metric(e.url, "gitedge_mirror_discards_total") >= 1, "discarded");
  const status = (await (await fetch(`${e.url}/_edge/status/${REPO}`, { headers: ADMIN })).json())
    .snapshot;
  assert(status.tips.includes(pushed.tip), JSON.stringify(status));
  await git(["clone", "-q", "--bare", origin.repoUrl(REPO), `${dir.path}/direct`]);
  const trace = await tracedGit([...URI_CLONE, "--bare", `${e.url}/${REPO}`, `${dir.path}/uri`]);
  assertEquals(urisFetched(trace).length, status.packs.length, "by URIs");
  await git(["fsck", "--full"], { cwd: `${dir.path}/uri` });
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/uri`);

  // The mirror seeded again from the new snapshot; then an object its tip reaches is removed.
  const [again] = mirrorDirs(e.mirrors);
  assert(again, "seeded again from the new snapshot");
  const blob = (await git(["rev-parse", `${pushed.tip}:pushed-${pushed.old.slice(0, 8)}-2.bin`], {
    cwd: again,
  })).trim();
  const keep = (await git(["rev-list", "--objects", "--all"], { cwd: again })).split("\n")
    .map((l) => l.split(" ")[0]).filter((o) => o.length === 40 && o !== blob);
  const old = packsByAge(again);
  await git(["pack-objects", "-q", `${again}/objects/pack/pack`], {
    cwd: again,
    stdin: new TextEncoder().encode(keep.join("\n") + "\n"),
  });
  for (const p of old) {
    Deno.removeSync(p);
    Deno.removeSync(p.replace(/\.pack$/, ".idx"));
  }
  await assertRejects(() => git(["cat-file", "-e", blob], { cwd: again }));
  const damaged = await metric(e.url, 'gitedge_mirror_total{result="damaged"}');
  await git(["clone", "-q", "--depth", "1", origin.repoUrl(REPO), `${dir.path}/direct1`]);
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/shallow1`]);
  await assertSameClone(`${dir.path}/direct1`, `${dir.path}/shallow1`);
  await git(["fsck", "--full"], { cwd: `${dir.path}/shallow1` });
  assertEquals(await metric(e.url, 'gitedge_mirror_total{result="damaged"}'), damaged + 1);
  await e.edge.idle();
  assertEquals(mirrorDirs(e.mirrors), [], "discarded, not served");
});

/**
 * A git for the mirrors that runs `fault` (shell, with git's arguments in `$@`) in place of each
 * run bringing objects into a mirror (`fetch`, `index-pack` or `unpack-objects` in a `<id>.git`
 * directory) while the file `<dir>/<flag>` exists (created here); every other run is git itself.
 */
async function faultyGit(dir: string, flag: string, fault: string): Promise<string> {
  const path = `${dir}/${flag}-git`;
  await Deno.writeTextFile(`${dir}/${flag}`, "");
  await Deno.writeTextFile(
    path,
    `#!/bin/sh
case "$PWD" in *.git) ;; *) exec git "$@" ;; esac
for a in "$@"; do
  case "$a" in fetch|index-pack|unpack-objects)
    if [ -e '${dir}/${flag}' ]; then
${fault}
    fi ;;
  esac
done
exec git "$@"
`,
  );
  await Deno.chmod(path, 0o755);
  return path;
}

/**
 * A git for the mirrors whose updates are killed (SIGKILL, the whole process group) `afterMs`
 * after each has written its first object, while `<dir>/kill-updates` exists (every update then
 * fails: the one the clone's listing starts and the clone's own).
 */
function killingGit(dir: string, afterMs: number): Promise<string> {
  const mark = `${dir}/killed.mark`;
  return faultyGit(
    dir,
    "kill-updates",
    `      : > '${mark}'
      setsid git "$@" & pid=$!
      # Killed once its first objects are written (the commits come first), ${afterMs} ms later;
      # at the latest 3 s in (the origin's answer pauses longer).
      i=0
      while [ $i -lt 60 ] && [ -z "$(find objects -type f -newer '${mark}' 2>/dev/null | head -n 1)" ]; do
        sleep 0.05; i=$((i + 1))
      done
      sleep ${afterMs / 1000}
      kill -9 -- -$pid 2>/dev/null || kill -9 $pid
      wait $pid
      exit 137`,
  );
}

/**
 * After an update that failed: the previous mirror is there, whole, its refs `before`, nothing of
 * the update left in it, and it answers what it holds (a fetch of its old tip by id).
 */
async function assertKept(
  e: MirrorEdge,
  mirror: string,
  before: Record<string, string>,
  dir: string,
): Promise<void> {
  assertEquals(mirrorDirs(e.mirrors), [mirror], "kept");
  assertEquals(await refsOf(mirror), before, "no ref moved");
  assertEquals(temporaries(mirror), [], "nothing of the update left behind");
  await git(["fsck", "--full", "--no-dangling"], { cwd: mirror });
  const hits = await metric(e.url, 'gitedge_mirror_total{result="hit"}');
  assert(await fetchesById(`${e.url}/${REPO}`, before["refs/heads/main"], dir), "the old tip");
  assertEquals(
    await metric(e.url, 'gitedge_mirror_total{result="hit"}'),
    hits + 1,
    "by the mirror",
  );
}

Deno.test("mirror heal: a git killed mid-update leaves the previous mirror serving; the fetch goes to the origin, the next update succeeds", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  // The origin's answers beyond 32 KiB pause: the update is killed while its pack is arriving.
  await using relay = await startRelay(origin.url);
  await using e = await mirrorEdge(relay.url, { mirrorGit: await killingGit(dir.path, 100) });
  await makeRepo(origin, REPO, { commits: 8 });
  await warm(e, REPO, ADMIN);
  await e.edge.idle();
  const [mirror] = mirrorDirs(e.mirrors);
  const before = await refsOf(mirror);
  const pushed = await pushCommits(origin, REPO, dir.path, 3, 128 * 1024);
  relay.setFaults({
    [`/${REPO}/git-upload-pack`]: { kind: "stall", afterBytes: 32 * 1024, ms: 5000, times: 100 },
  });
  await git(["clone", "-q", "--depth", "1", origin.repoUrl(REPO), `${dir.path}/direct`]);
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/killed`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/killed`);
  assert(await Deno.stat(`${dir.path}/killed.mark`).then(() => true), "the kill happened");
  assert(await metric(e.url, "gitedge_mirror_update_failures_total") >= 1, "update failed");
  relay.setFaults({});
  await Deno.remove(`${dir.path}/kill-updates`);
  await assertKept(e, mirror, before, dir.path);
  // The next update (not killed) brings the new tip: started by a listing (the fetch by id's or
  // the clone's) or by the clone's fetch; either way the clone is the mirror's answer.
  const served = async () =>
    await metric(e.url, 'gitedge_mirror_total{result="updated"}') +
    await metric(e.url, 'gitedge_mirror_total{result="hit"}');
  const servedBefore = await served();
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/after`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/after`);
  // (The fetch by id above may have been the listing that started it.)
  assert(await metric(e.url, "gitedge_mirror_updates_total") >= 1, "an update succeeded");
  assertEquals(
    await served(),
    servedBefore + 1,
    "served from the mirror after its update: " +
      (await (await fetch(`${e.url}/_edge/metrics`, { headers: ADMIN })).text()).split("\n")
        .filter((l) => l.startsWith("gitedge_mirror")).join(" | "),
  );
  assertEquals((await refsOf(mirror))["refs/heads/main"], pushed.tip);
});

Deno.test("mirror heal: after a restart the operator still sees the mirror's state, size and last change", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const store = `${dir.path}/store`;
  const row = async (url: string) =>
    (await (await fetch(`${url}/_edge/repos`, { headers: ADMIN })).json()).repositories
      .find((r: { path: string }) => r.path === REPO);
  await makeRepo(origin, REPO, { commits: 4 });
  let seen;
  {
    await using e = await mirrorEdge(origin.url, { store });
    await warm(e, REPO, ADMIN);
    await e.edge.idle();
    seen = (await row(e.url)).mirror;
    assertEquals(seen.state, "ready", JSON.stringify(seen));
  }
  await using again = await mirrorEdge(origin.url, { store });
  const after = (await row(again.url)).mirror;
  assertEquals(after.state, "ready", JSON.stringify(after));
  assertEquals(after.bytes, seen.bytes);
  assert(after.updatedAt !== null, `last change after the restart: ${JSON.stringify(after)}`);
  assert(Date.parse(after.updatedAt) <= Date.now(), after.updatedAt);
});

Deno.test("mirror heal: what a process that died mid-seed or mid-layer left in the mirror directory goes at start-up; mirrors stay", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const store = `${dir.path}/store`;
  await makeRepo(origin, REPO, { commits: 4 });
  let mirror;
  {
    await using e = await mirrorEdge(origin.url, { store });
    await warm(e, REPO, ADMIN);
    await e.edge.idle();
    [mirror] = mirrorDirs(e.mirrors);
  }
  const id = mirror!.split("/").at(-1)!.replace(/\.git$/, "");
  const leftovers = ["seed", "layer", "discard"].map((kind) =>
    `${store}/mirrors/${id}.${kind}-${crypto.randomUUID()}`
  );
  for (const d of leftovers) {
    await Deno.mkdir(`${d}/objects/pack`, { recursive: true });
    await Deno.writeFile(`${d}/objects/pack/tmp`, new Uint8Array(4096));
  }
  // And what an update killed with its process left inside the mirror: its quarantine, and a
  // partial pack of a git that wrote into the mirror itself.
  const inside = [`${mirror}/objects/incoming-${crypto.randomUUID()}`, `${mirror}/objects/pack`];
  await Deno.mkdir(`${inside[0]}/pack`, { recursive: true });
  await Deno.writeFile(`${inside[0]}/pack/tmp_pack_x1y2z3`, new Uint8Array(4096));
  await Deno.writeFile(`${inside[1]}/tmp_pack_a1b2c3`, new Uint8Array(4096));
  assertEquals(temporaries(mirror!).length, 2);
  await using again = await mirrorEdge(origin.url, { store });
  for (const d of leftovers) assert(!await Deno.stat(d).then(() => true, () => false), d);
  assertEquals(mirrorDirs(again.mirrors), [mirror!], "the mirror stays");
  assertEquals(temporaries(mirror!), [], "the update's leftovers went");
  await git(["fsck", "--full", "--no-dangling"], { cwd: mirror! });
});

/**
 * A git for the mirrors whose updates cannot write a file past 64 blocks while `<dir>/disk-full`
 * exists: `ulimit -f` with SIGXFSZ ignored, so the write that crosses it fails (EFBIG) the way a
 * write to a full disk fails (ENOSPC), and git reports it and exits. (A real full filesystem needs
 * a mount, which a CI container may not allow.)
 */
function fullDiskGit(dir: string): Promise<string> {
  return faultyGit(
    dir,
    "disk-full",
    `      : > '${dir}/filled.mark'
      trap '' XFSZ
      ulimit -f 64
      exec git "$@"`,
  );
}

/** What an update leaves in `mirror` when cut short: quarantines and git's temporary files. */
function temporaries(mirror: string): string[] {
  const found: string[] = [];
  const walk = (d: string, inQuarantine: boolean) => {
    for (const e of Deno.readDirSync(d)) {
      const quarantine = inQuarantine || e.name.startsWith("incoming-");
      if (e.isDirectory) walk(`${d}/${e.name}`, quarantine);
      else if (quarantine || e.name.startsWith("tmp_")) found.push(`${d}/${e.name}`);
    }
  };
  walk(`${mirror}/objects`, false);
  return found;
}

Deno.test("mirror heal: a disk filling up mid-update leaves the previous mirror serving and no partial pack behind; the fetch goes to the origin, the next update succeeds", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge(origin.url, { mirrorGit: await fullDiskGit(dir.path) });
  await Deno.remove(`${dir.path}/disk-full`);
  await makeRepo(origin, REPO, { commits: 8 });
  await warm(e, REPO, ADMIN);
  await e.edge.idle();
  const [mirror] = mirrorDirs(e.mirrors);
  const before = await refsOf(mirror);
  const bytesBefore = await metric(e.url, "gitedge_mirror_disk_bytes");
  // Three commits of 128 KiB of incompressible data each: the update's pack is far past the
  // 32-64 KiB the disk has room for.
  const pushed = await pushCommits(origin, REPO, dir.path, 3, 128 * 1024);
  await Deno.writeTextFile(`${dir.path}/disk-full`, "");
  await git(["clone", "-q", "--depth", "1", origin.repoUrl(REPO), `${dir.path}/direct`]);
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/full`]);
  await e.edge.idle();
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/full`);
  assert(await Deno.stat(`${dir.path}/filled.mark`).then(() => true), "an update ran on it");
  assert(await metric(e.url, "gitedge_mirror_update_failures_total") >= 1, "update failed");
  // No partial pack left filling the disk.
  assertEquals(await metric(e.url, "gitedge_mirror_disk_bytes"), bytesBefore);
  await assertKept(e, mirror, before, dir.path);
  // Room again: the next update brings the new tip, and the clone is the mirror's answer.
  await Deno.remove(`${dir.path}/disk-full`);
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/after`]);
  await e.edge.idle();
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/after`);
  assert(await metric(e.url, "gitedge_mirror_updates_total") >= 1, "an update succeeded");
  assertEquals((await refsOf(mirror))["refs/heads/main"], pushed.tip);
});
