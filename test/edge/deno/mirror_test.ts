/**
 * The git mirror on the Deno server (edge/deno/mirror.ts, src/proxy/fetch/mirror_fetch.ts):
 * fetches the snapshot does not take (shallow, partial, incremental, by id) are answered by git's
 * upload-pack on the edge's mirror, and the origin sends only what is new, once. Each result is
 * compared with the same request made directly, and the origin's fetches and bytes are counted.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { type Origin, startOrigin } from "../../support/origin.ts";
import { addCommits, assertSameClone, makeRepo, refsOf } from "../../support/fixtures.ts";
import { rawWantFetch, startMirrorEdge as mirrorEdge } from "../../support/mirror_edge.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { URI_CLONE, warm } from "../../proxy/edge_suite.ts";
import { tracedGit, urisFetched } from "../../support/traced_git.ts";
import { modernGit } from "../../support/git_builds.ts";
import { skipped } from "../../support/skips.ts";

const REPO = "m.git";

async function metric(edgeUrl: string, line: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return Number(text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1] ?? 0);
}

/** Upload-pack bytes and `fetch` commands the origin served since its last reset. */
function originCost(origin: Origin): { fetches: number; bytes: number } {
  return { fetches: origin.stats.commands["fetch"] ?? 0, bytes: origin.stats.bytesOut };
}

async function gitBin(): Promise<string> {
  const modern = await modernGit();
  return typeof modern === "string" ? "git" : modern.bin;
}

/** A repository with a snapshot at the edge, then `commits` new commits at the origin. */
async function movedOn(origin: Origin, edgeUrl: string, commits = 3) {
  await makeRepo(origin, REPO, { commits: 12 });
  await warm({ url: edgeUrl }, REPO);
  return await addCommits(origin, REPO, { commits, tag: "v-new" });
}

Deno.test("mirror: a depth-1 clone of a tip pushed after the snapshot costs the origin one small incremental fetch; the next costs it none", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  await movedOn(origin, e.url);

  origin.stats.reset();
  await git(["clone", "-q", "--depth", "1", origin.repoUrl(REPO), `${dir.path}/direct`]);
  const direct = originCost(origin);

  origin.stats.reset();
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/c1`]);
  const first = originCost(origin);
  // The mirror's update (the new commits only) and nothing else computed a pack.
  assertEquals(first.fetches, 1, JSON.stringify(origin.stats.commands));
  assert(
    first.bytes < direct.bytes * 0.2,
    `origin sent ${first.bytes} bytes through the edge, ${direct.bytes} direct`,
  );
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/c1`);
  await git(["fsck", "--full"], { cwd: `${dir.path}/c1` });

  origin.stats.reset();
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/c2`]);
  assertEquals(originCost(origin).fetches, 0, JSON.stringify(origin.stats.commands));
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/c2`);
  assert(await metric(e.url, 'gitedge_mirror_total{result="hit"}') >= 1);
  // The operator sees the mirror: its size, last update and what it answered.
  const repos = await (await fetch(`${e.url}/_edge/repos`)).json();
  assertEquals(repos.repositories[0].mirror.state, "ready");
  assert(repos.repositories[0].mirror.bytes > 0 && repos.repositories[0].mirror.updatedAt);
  assertEquals(repos.mirrors.answers, 2);
  assert(repos.mirrors.bytes > 0);
  // Seeding the mirror left the snapshot's packs as they were (their store versions, which a
  // hard link would change), and a clone asking for URIs gets them.
  const store = new FsPackStore(e.store);
  for (const key of await listKeys(e.store, "repos")) {
    if (!key.endsWith("manifest.json")) continue;
    const manifest = JSON.parse(await Deno.readTextFile(`${e.store}/${key}`));
    for (const pack of manifest.layers.flat()) {
      assertEquals((await store.head(pack.key))?.version, pack.version, pack.key);
    }
  }
  const trace = await tracedGit([...URI_CLONE, "--bare", `${e.url}/${REPO}`, `${dir.path}/u`]);
  assert(urisFetched(trace).length > 0, "packfile URIs still handed out");
});

/** Keys of files under `prefix` of a filesystem store. */
async function listKeys(root: string, prefix: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    for await (const e of Deno.readDir(`${root}/${rel}`)) {
      if (e.isDirectory) await walk(`${rel}/${e.name}`);
      else out.push(`${rel}/${e.name}`);
    }
  };
  await walk(prefix);
  return out;
}

Deno.test("mirror: a blobless clone of a new tip and its checkout's lazy fetches, and a tree:0 clone, come from the mirror", async () => {
  const bin = await gitBin();
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  await movedOn(origin, e.url);
  // The origin's advertisement (with `filter`) reaches the edge with each clone's info/refs.
  origin.stats.reset();
  await git(["clone", "-q", "--filter=blob:none", origin.repoUrl(REPO), `${dir.path}/direct`], {
    bin,
  });
  const direct = originCost(origin);

  origin.stats.reset();
  await git(["clone", "-q", "--filter=blob:none", `${e.url}/${REPO}`, `${dir.path}/c1`], { bin });
  const first = originCost(origin);
  assertEquals(
    first.fetches,
    1,
    `only the mirror's update: ${JSON.stringify(origin.stats.commands)}`,
  );
  assert(
    first.bytes < direct.bytes * 0.2,
    `origin ${first.bytes} via the edge, ${direct.bytes} direct`,
  );
  assertEquals(await refsOf(`${dir.path}/c1`), await refsOf(`${dir.path}/direct`));
  await git(["fsck", "--full"], { cwd: `${dir.path}/c1`, bin });
  // Checking out the first commit fetches its blobs lazily, from the edge's mirror.
  const root = (await git(["rev-list", "--max-parents=0", "HEAD"], { cwd: `${dir.path}/c1`, bin }))
    .trim().split("\n")[0];
  origin.stats.reset();
  await git(["checkout", "-q", root], { cwd: `${dir.path}/c1`, bin });
  assertEquals(originCost(origin).fetches, 0, JSON.stringify(origin.stats.commands));
  await git(["checkout", "-q", root], { cwd: `${dir.path}/direct`, bin });
  assert(originCost(origin).fetches > 0, "the checkout fetched blobs lazily");
  const tree = (d: string) => git(["ls-files", "-s"], { cwd: `${dir.path}/${d}`, bin });
  assertEquals(await tree("c1"), await tree("direct"));

  origin.stats.reset();
  await git(["clone", "-q", "--filter=tree:0", `${e.url}/${REPO}`, `${dir.path}/t0`], { bin });
  assertEquals(originCost(origin).fetches, 0, JSON.stringify(origin.stats.commands));
  await git(["clone", "-q", "--filter=tree:0", origin.repoUrl(REPO), `${dir.path}/t0d`], { bin });
  assertEquals(await tree("t0"), await tree("t0d"));
  await git(["fsck", "--full"], { cwd: `${dir.path}/t0`, bin });
});

Deno.test("mirror: fetch by id and fetch --deepen are answered by the mirror as the origin answers them", async () => {
  const bin = await gitBin();
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  const { tip } = await movedOn(origin, e.url);
  const byId = async (url: string, name: string) => {
    await git(["init", "-q", `${dir.path}/${name}`], { bin });
    await git(["fetch", "-q", "--depth", "2", url, tip], { cwd: `${dir.path}/${name}`, bin });
    await git(["update-ref", "refs/heads/got", tip], { cwd: `${dir.path}/${name}`, bin });
  };
  await byId(origin.repoUrl(REPO), "direct");
  origin.stats.reset();
  await byId(`${e.url}/${REPO}`, "edge");
  assertEquals(originCost(origin).fetches, 1, "the mirror's update");
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);

  // Deepen both by 3: the mirror alone.
  origin.stats.reset();
  for (const [d, url] of [["direct", origin.repoUrl(REPO)], ["edge", `${e.url}/${REPO}`]]) {
    await git(["fetch", "-q", "--deepen", "3", url, tip], { cwd: `${dir.path}/${d}`, bin });
  }
  assertEquals(originCost(origin).fetches, 1, "the direct deepen only");
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
  await git(["fsck", "--full"], { cwd: `${dir.path}/edge`, bin });
});

Deno.test("mirror: git fetch from five states at once costs the origin one incremental fetch, each result the direct one", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  await makeRepo(origin, REPO, { commits: 12 });
  await warm({ url: e.url }, REPO);
  const states: string[] = [];
  for (let i = 0; i < 5; i++) {
    await addCommits(origin, REPO, { commits: 1 });
    const d = `${dir.path}/s${i}`;
    await git(["clone", "-q", origin.repoUrl(REPO), d]);
    await git(["remote", "set-url", "origin", `${e.url}/${REPO}`], { cwd: d });
    states.push(d);
  }
  await addCommits(origin, REPO, { commits: 2, tag: "v-five" });
  origin.stats.reset();
  await Promise.all(states.map((d) => git(["fetch", "-q", "--tags", "origin"], { cwd: d })));
  assertEquals(originCost(origin).fetches, 1, JSON.stringify(origin.stats.commands));
  await git(["clone", "-q", "--mirror", origin.repoUrl(REPO), `${dir.path}/direct`]);
  const want = await refsOf(`${dir.path}/direct`);
  for (const d of states) {
    const got = await refsOf(d);
    assertEquals(got["refs/remotes/origin/main"], want["refs/heads/main"]);
    assertEquals(got["refs/tags/v-five"], want["refs/tags/v-five"]);
    await git(["fsck", "--full"], { cwd: d });
  }
});

Deno.test("mirror: force-pushed and deleted refs between the mirror's update and a clone, and clones during an update", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  await movedOn(origin, e.url);
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/first`]);
  // Force-push main back and forward on another line, delete a branch and a tag.
  const bare = `${origin.root}/${REPO}`;
  const branches = Object.keys(await refsOf(bare)).filter((r) => r.startsWith("refs/heads/f"));
  await git(["update-ref", "refs/heads/main", "main~4"], { cwd: bare });
  await addCommits(origin, REPO, { commits: 2 });
  await git(["update-ref", "-d", branches[0]], { cwd: bare });
  await git(["tag", "-d", "v-new"], { cwd: bare });

  origin.stats.reset();
  const clones = [0, 1, 2, 3].map((i) =>
    git([
      "clone",
      "-q",
      "--depth",
      "1",
      "--no-single-branch",
      `${e.url}/${REPO}`,
      `${dir.path}/c${i}`,
    ])
  );
  await Promise.all(clones);
  assertEquals(originCost(origin).fetches, 1, JSON.stringify(origin.stats.commands));
  await git([
    "clone",
    "-q",
    "--depth",
    "1",
    "--no-single-branch",
    origin.repoUrl(REPO),
    `${dir.path}/direct`,
  ]);
  for (let i = 0; i < 4; i++) {
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/c${i}`);
    await git(["fsck", "--full"], { cwd: `${dir.path}/c${i}` });
  }
});

Deno.test("mirror: a private origin's anonymous, wrong and revoked callers get the origin's 401 and no byte of the mirror", async () => {
  await using dir = await tempDir();
  const auth = { user: "ci", password: "s3cret" };
  await using origin = await startOrigin({ requireAuth: auth });
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2, authTtlSeconds: 1 });
  const basic = (user: string, password: string) => ({
    authorization: `Basic ${btoa(`${user}:${password}`)}`,
  });
  const good = basic("ci", "s3cret");
  await makeRepo(origin, REPO, { commits: 8 });
  await warm({ url: e.url }, REPO, good);
  const { tip } = await addCommits(origin, REPO, { commits: 2 });
  const authed = `http://ci:s3cret@${e.url.slice("http://".length)}/${REPO}`;
  await git(["clone", "-q", "--depth", "1", authed, `${dir.path}/ok`]);
  const url = `${e.url}/${REPO}`;
  // The authorised caller's fetch of the new tip is the mirror's (it holds it now).
  const served = await rawWantFetch(url, tip, good);
  assertEquals(served.status, 200);
  assert(served.pack, "the authorised fetch got a pack");
  const hits = await metric(e.url, 'gitedge_mirror_total{result="hit"}');
  assert(hits >= 1, `the mirror answered (hits ${hits})`);

  for (
    const [who, headers] of [["anonymous", {}], ["wrong password", basic("ci", "nope")]] as const
  ) {
    origin.stats.reset();
    const res = await rawWantFetch(url, tip, headers);
    assertEquals(res.status, 401, who);
    assert(!res.pack, `${who}: no pack`);
    assert(origin.stats.requests >= 1, `${who}: the 401 is the origin's`);
  }
  // Revoked at the origin: once --auth-ttl has passed, the edge asks again and is refused.
  auth.password = "rotated";
  await new Promise((r) => setTimeout(r, 1100));
  const revoked = await rawWantFetch(url, tip, good);
  assertEquals(revoked.status, 401, "revoked");
  assert(!revoked.pack, "revoked: no pack");
  assertEquals(await metric(e.url, 'gitedge_mirror_total{result="hit"}'), hits);
});

Deno.test("mirror: a damaged mirror is discarded, never served; the fetch goes to the origin and the next reseeds", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  await movedOn(origin, e.url);
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/c0`]);
  const mirrors = `${e.store}/mirrors`;
  const [repoDir] = [...Deno.readDirSync(mirrors)].map((d) => `${mirrors}/${d.name}`);
  // Zero the first half of the mirror's largest pack (the snapshot's objects), its size, header
  // and trailer kept: every pack still opens and the mirror still claims every object (no update
  // runs), but upload-pack cannot read what it must walk.
  const packs = [...Deno.readDirSync(`${repoDir}/objects/pack`)]
    .filter((f) => f.name.endsWith(".pack"))
    .map((f) => `${repoDir}/objects/pack/${f.name}`)
    .sort((a, b) => Deno.statSync(b).size - Deno.statSync(a).size);
  const bytes = Deno.readFileSync(packs[0]);
  bytes.fill(0, 12, bytes.length >> 1);
  // A new file (the mirror's packs may be hard links of the store's).
  Deno.removeSync(packs[0]);
  Deno.writeFileSync(packs[0], bytes);
  await git(["clone", "-q", "--depth", "1", origin.repoUrl(REPO), `${dir.path}/direct`]);
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/c1`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/c1`);
  await e.edge.idle();
  // Found by whichever read came first: upload-pack's answer, or the connectivity check of the
  // update that the clone's listing started.
  assert(await metric(e.url, "gitedge_mirror_discards_total") >= 1, "found damaged");
  assert(
    !Deno.statSync(mirrors) || ![...Deno.readDirSync(mirrors)].some((d) => d.name.endsWith(".git")),
    "discarded",
  );
  // The next clone is answered from a whole mirror (seeded again if none), at most one update.
  origin.stats.reset();
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/c2`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/c2`);
  await git(["fsck", "--full"], { cwd: `${dir.path}/c2` });
  assert(originCost(origin).fetches <= 1, "at most the new mirror's update");
});

const modern = await modernGit();
if (typeof modern === "string") {
  skipped("mirror: git 2.55 everywhere", modern);
} else {
  Deno.test("mirror: git 2.55 as origin, mirror and client: a depth-1 URI-asking clone and a blobless one of a new tip", async () => {
    const bin = modern.bin;
    await using dir = await tempDir();
    await using origin = await startOrigin({ gitBin: bin });
    await using e = await mirrorEdge({ origin: origin.url, chunks: 2, mirrorGit: bin });
    await movedOn(origin, e.url);
    // A client asking for packfile URIs: the mirror's upload-pack (which refuses arguments it
    // did not advertise since git 2.45) never sees the line.
    const uris = ["-c", "fetch.uriProtocols=http"];
    for (
      const [name, how] of [["shallow", ["--depth", "1"]], ["blobless", ["--filter=blob:none"]]]
    ) {
      await git(["clone", "-q", ...how, origin.repoUrl(REPO), `${dir.path}/${name}-direct`], {
        bin,
      });
      origin.stats.reset();
      await git([...uris, "clone", "-q", ...how, `${e.url}/${REPO}`, `${dir.path}/${name}`], {
        bin,
      });
      assert(originCost(origin).fetches <= 1, JSON.stringify(origin.stats.commands));
      assertEquals(await refsOf(`${dir.path}/${name}`), await refsOf(`${dir.path}/${name}-direct`));
      await git(["fsck", "--full"], { cwd: `${dir.path}/${name}`, bin });
    }
    await assertSameClone(`${dir.path}/shallow-direct`, `${dir.path}/shallow`);
    assertEquals(await metric(e.url, 'gitedge_mirror_total{result="fallback"}'), 0);
    assertEquals(await metric(e.url, 'gitedge_mirror_total{result="damaged"}'), 0);
    assert(await metric(e.url, 'gitedge_mirror_total{result="hit"}') >= 1);
  });
}

Deno.test("mirror: goes with its repository's snapshot when the store's cap evicts it", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  // Room for the small repository's snapshot, not for both.
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2, storeMaxBytes: 400_000 });
  await makeRepo(origin, "small.git", { commits: 10, binaryBytes: 1024 });
  await makeRepo(origin, "big.git", { commits: 10, binaryBytes: 1024 * 1024, seed: 2 });
  const mirrors = () => {
    try {
      return [...Deno.readDirSync(`${e.store}/mirrors`)].filter((d) => d.name.endsWith(".git"));
    } catch {
      return [];
    }
  };
  await warm({ url: e.url }, "small.git");
  await e.edge.idle();
  assertEquals(mirrors().length, 1, "seeded when the snapshot was published");
  // The big one's snapshot puts the store over its cap: the small one (older) is evicted.
  await warm({ url: e.url }, "big.git");
  await e.edge.idle();
  const small = (await (await fetch(`${e.url}/_edge/repos`)).json()).repositories
    .find((r: { path: string }) => r.path === "small.git");
  assertEquals(small.state, "evicted");
  assertEquals(small.mirror?.state ?? "none", "none", "the mirror went with it");
  // Its fetches go to the origin, as for any repository without a snapshot.
  await git(["clone", "-q", "--depth", "1", `${e.url}/small.git`, `${dir.path}/c`]);
});
