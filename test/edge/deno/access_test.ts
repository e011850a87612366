/**
 * Who gets what through the edge (docs/access.md): objects only for a caller the origin would
 * serve a `fetch` (not one it merely lists refs to), revocation within `--auth-ttl`, and nothing
 * about a private repository (its existence, whether a state was fetched) for a caller the origin
 * refused. Real `git http-backend` origins with Basic auth, stock git.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, GitCommandError, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo, refsOf } from "../../support/fixtures.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { modernGit } from "../../support/git_builds.ts";
import { URI_CLONE, warm } from "../../proxy/edge_suite.ts";
import { encodePkts } from "../../../src/git/pktline.ts";

const REPO = "r.git";
const ALICE = { user: "alice", password: "pw1" };

function basic(user: string, password: string): string {
  return `Basic ${btoa(`${user}:${password}`)}`;
}

async function gitBin(): Promise<string> {
  const modern = await modernGit();
  return typeof modern === "string" ? "git" : modern.bin;
}

/** `http://user:password@host/...` from `url`. */
function withUser(url: string, user: string, password: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = password;
  return u.toString().replace(/\/$/, "");
}

/** Runs git; its exit status (0 or git's) instead of a throw. */
async function gitStatus(args: string[], bin: string): Promise<number> {
  try {
    await git(args, { bin });
    return 0;
  } catch (error) {
    if (error instanceof GitCommandError) return error.code;
    throw error;
  }
}

const V2 = { "git-protocol": "version=2", "content-type": "application/x-git-upload-pack-request" };

/** POSTs a v2 command to `repoUrl`'s upload-pack; status and body. */
async function command(
  repoUrl: string,
  lines: (string | "delim" | "flush")[],
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Uint8Array }> {
  const res = await fetch(`${repoUrl}/git-upload-pack`, {
    method: "POST",
    headers: { ...V2, ...headers },
    body: encodePkts(lines) as Uint8Array<ArrayBuffer>,
  });
  return { status: res.status, body: new Uint8Array(await res.arrayBuffer()) };
}

/** A plain full clone's fetch of `tips` (what the edge streams from its snapshot). */
function plainFetch(tips: string[]): (string | "delim" | "flush")[] {
  return [
    "command=fetch\n",
    "agent=git/2.39.5\n",
    "delim",
    "ofs-delta\n",
    "no-progress\n",
    ...[...new Set(tips)].map((t) => `want ${t}\n`),
    "done\n",
    "flush",
  ];
}

Deno.test("an origin that lists refs to anyone but guards fetch: no anonymous objects through a warm edge, by any path", async () => {
  // Failed before fetch_probe.ts: the edge took the anonymous ls-refs' 200 as leave to serve
  // objects, and the anonymous clone succeeded by plain stream, by URIs and by bundles.
  const bin = await gitBin();
  await using dir = await tempDir();
  await using origin = await startOrigin({ requireAuth: ALICE, authScope: "fetch" });
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
  const { refs } = await makeRepo(origin, REPO, { commits: 6, tags: 1 });
  const alice = basic(ALICE.user, ALICE.password);
  await warm(edge, REPO, { "x-origin-authorization": alice });
  const url = `${edge.url}/${REPO}`;
  const aliceUrl = withUser(url, ALICE.user, ALICE.password);
  // The origin's own rule: refs listed to anyone, no anonymous clone.
  assert((await git(["ls-remote", origin.repoUrl(REPO)], { bin })).includes("refs/heads/main"));
  assert(await gitStatus(["clone", "-q", origin.repoUrl(REPO), `${dir.path}/d0`], bin) !== 0);
  // Alice clones through the edge (the memo then knows her, not the anonymous caller).
  await git([...URI_CLONE, aliceUrl, `${dir.path}/a1`], { bin });
  await git(["clone", "-q", withUser(origin.repoUrl(REPO), "alice", "pw1"), `${dir.path}/d1`], {
    bin,
  });
  await assertSameClone(`${dir.path}/a1`, `${dir.path}/d1`);

  const anonymous: [string, string[]][] = [
    ["plain", ["clone", "-q", url]],
    ["URIs", [...URI_CLONE, url]],
    ["bundle list", ["clone", "-q", `--bundle-uri=${edge.url}/_edge/bundle-list/${REPO}`, url]],
    ["bundle-uri", ["-c", "transfer.bundleURI=true", "clone", "-q", url]],
  ];
  for (const [what, args] of anonymous) {
    // The anonymous ls-refs is answered (200) as the origin answers it; the clone must fail.
    const status = await gitStatus([...args, `${dir.path}/anon-${what.replace(" ", "-")}`], bin);
    assert(status !== 0, `an anonymous clone (${what}) through the edge succeeded`);
  }
  // The edge's own answers, asked directly: the origin's refusal each time.
  const tips = Object.values(refs);
  assertEquals((await command(url, plainFetch(tips))).status, 401, "plain fetch");
  const bundleUri = await command(url, ["command=bundle-uri\n", "flush"]);
  assertEquals(bundleUri.status, 401, "bundle-uri");
  const list = await fetch(`${edge.url}/_edge/bundle-list/${REPO}`);
  await list.body?.cancel();
  assertEquals(list.status, 401, "bundle list");
  // Alice still gets everything by each path, and the same as direct.
  await git(["clone", "-q", aliceUrl, `${dir.path}/a2`], { bin });
  await assertSameClone(`${dir.path}/a2`, `${dir.path}/d1`);
  await git(["-c", "transfer.bundleURI=true", "clone", "-q", aliceUrl, `${dir.path}/a3`], { bin });
  // The bundles' refs (refs/bundles/*) show the clone took the edge's bundles; less them, the
  // clone is the direct one.
  const bundleRefs = Object.keys(await refsOf(`${dir.path}/a3`))
    .filter((r) => r.startsWith("refs/bundles/"));
  assert(bundleRefs.length > 0, "alice's clone applied the edge's bundles");
  for (const r of bundleRefs) await git(["update-ref", "-d", r], { cwd: `${dir.path}/a3`, bin });
  await assertSameClone(`${dir.path}/a3`, `${dir.path}/d1`);
});

Deno.test("GET /_edge/bundle-list/<private repo> without credentials: the origin's 401 whether the edge holds bundles or not", async () => {
  // Failed before: 401 for a repository with bundles at the edge, 404 for one without (an
  // existence oracle); the origin answers 401 to both.
  await using origin = await startOrigin({ requireAuth: ALICE });
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
  await makeRepo(origin, "held.git", { commits: 3 });
  await makeRepo(origin, "cold.git", { commits: 3 });
  const alice = basic(ALICE.user, ALICE.password);
  await warm(edge, "held.git", { "x-origin-authorization": alice });
  const statusOf = async (repo: string, headers: Record<string, string> = {}) => {
    const res = await fetch(`${edge.url}/_edge/bundle-list/${repo}`, { headers });
    await res.body?.cancel();
    return res.status;
  };
  assertEquals(await statusOf("held.git"), 401, "held");
  assertEquals(await statusOf("cold.git"), 401, "cold");
  assertEquals(await statusOf("never-was.git"), 401, "unknown");
  const wrong = basic("alice", "nope");
  assertEquals(await statusOf("held.git", { authorization: wrong }), 401, "held, wrong password");
  assertEquals(await statusOf("cold.git", { authorization: wrong }), 401, "cold, wrong password");
  // Alice: the list where there are bundles, 404 where there are none.
  assertEquals(await statusOf("held.git", { authorization: alice }), 200);
  assertEquals(await statusOf("cold.git", { authorization: alice }), 404);
});

Deno.test("revocation within --auth-ttl: an ls-refs answer sent ahead does not renew the credential", async () => {
  // Failed before: using the ls-refs sent ahead renewed alice's memo, so a fetch --auth-ttl
  // after the origin changed her password was still streamed from the snapshot.
  const auth = { ...ALICE };
  await using origin = await startOrigin({ requireAuth: auth });
  await using edge = await denoEdgeFactory({
    origin: origin.url,
    chunks: 2,
    authTtlSeconds: 4,
    lsRefsAheadSeconds: 20,
  });
  const { refs } = await makeRepo(origin, REPO, { commits: 4 });
  const alice = basic(ALICE.user, ALICE.password);
  await warm(edge, REPO, { "x-origin-authorization": alice });
  const url = `${edge.url}/${REPO}`;
  const headers = { authorization: alice, "user-agent": "git/2.39.5" };
  const lsRefs: (string | "delim" | "flush")[] = [
    "command=ls-refs\n",
    "agent=git/2.39.5\n",
    "delim",
    "peel\n",
    "symrefs\n",
    "ref-prefix HEAD\n",
    "ref-prefix refs/heads/\n",
    "ref-prefix refs/tags/\n",
    "flush",
  ];
  const infoRefs = async () => {
    const res = await fetch(`${url}/info/refs?service=git-upload-pack`, {
      headers: { ...headers, "git-protocol": "version=2" },
    });
    await res.body?.cancel();
    return res.status;
  };
  const tips = Object.values(refs);
  // A clone as git makes it: the edge learns its ls-refs; its fetch is streamed from the snapshot.
  assertEquals(await infoRefs(), 200);
  assertEquals((await command(url, lsRefs, headers)).status, 200);
  assertEquals((await command(url, plainFetch(tips), headers)).status, 200);
  await new Promise((r) => setTimeout(r, 700));
  // The next clone: its info/refs sends the ls-refs ahead (alice's password still good)...
  const listingsBefore = origin.stats.commands["ls-refs"] ?? 0;
  assertEquals(await infoRefs(), 200);
  for (const until = Date.now() + 10_000; Date.now() < until;) {
    if ((origin.stats.commands["ls-refs"] ?? 0) > listingsBefore) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert((origin.stats.commands["ls-refs"] ?? 0) > listingsBefore, "the ls-refs sent ahead");
  // ...then the origin revokes it. Past --auth-ttl after the revocation, the clone goes on.
  auth.password = "pw2";
  const revokedAt = Date.now();
  await new Promise((r) => setTimeout(r, 4300));
  const listed = await command(url, lsRefs, headers);
  assertEquals(listed.status, 200, "the ls-refs answered ahead (before the revocation)");
  const fetched = await command(url, plainFetch(tips), headers);
  assertEquals(
    fetched.status,
    401,
    `objects served ${(Date.now() - revokedAt) / 1000} s after the revocation (--auth-ttl 4)`,
  );
});

Deno.test("metrics name no repository without the admin token; /_edge/repos tells an anonymous caller nothing of private ones", async () => {
  // Failed before: gitedge_repo_fetches_total{repo="r.git"} and gitedge_snapshot_age_seconds
  // named the private repository to any scraper, and an anonymous /_edge/repos gave the store's
  // bytes and how many repositories it did not list.
  await using dir = await tempDir();
  await using origin = await startOrigin({ requireAuth: ALICE });
  await makeRepo(origin, REPO, { commits: 3 });
  const token = "t0ken-for-the-test";
  await using open = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
  await using guarded = await denoEdgeFactory({ origin: origin.url, chunks: 2, adminToken: token });
  const alice = basic(ALICE.user, ALICE.password);
  for (const edge of [open, guarded]) {
    const headers: Record<string, string> = edge === guarded
      ? { authorization: `Bearer ${token}`, "x-origin-authorization": alice }
      : { "x-origin-authorization": alice };
    await warm(edge, REPO, headers);
    const url = withUser(`${edge.url}/${REPO}`, ALICE.user, ALICE.password);
    await git([...URI_CLONE, url, `${dir.path}/c-${edge === open ? "open" : "guarded"}`]);
  }
  const scrape = async (edgeUrl: string, headers: Record<string, string> = {}) =>
    await (await fetch(`${edgeUrl}/_edge/metrics`, { headers })).text();
  for (
    const [what, text] of [
      ["no token configured", await scrape(open.url)],
      ["token configured, none sent", await scrape(guarded.url)],
      ["a wrong token", await scrape(guarded.url, { authorization: "Bearer nope" })],
      ["origin credentials", await scrape(guarded.url, { authorization: alice })],
    ]
  ) {
    assert(!text.includes(REPO), `${what}: the metrics name ${REPO}`);
    // The aggregate is there: every repository as other.
    assert(/^gitedge_repo_fetches_total\{repo="other"\} [1-9]/m.test(text), `${what}: ${text}`);
  }
  const admin = await scrape(guarded.url, { authorization: `Bearer ${token}` });
  assert(/^gitedge_repo_fetches_total\{repo="r\.git"\} [1-9]/m.test(admin), admin);
  assert(/^gitedge_snapshot_age_seconds\{repo="r\.git"\} /m.test(admin), admin);

  const anonymous = await (await fetch(`${open.url}/_edge/repos`)).json();
  assertEquals(
    [anonymous.repositories, anonymous.store, anonymous.notListed],
    [[], null, null],
    JSON.stringify(anonymous),
  );
  const page = await (await fetch(`${open.url}/_edge/`)).text();
  assert(!page.includes("not listed") && !page.includes("Store<b>"), page);
  const owner = await (await fetch(`${open.url}/_edge/repos`, {
    headers: { authorization: alice },
  })).json();
  assertEquals(owner.repositories.map((r: { path: string }) => r.path), [REPO]);
  const operator = await (await fetch(`${guarded.url}/_edge/repos`, {
    headers: { authorization: `Bearer ${token}` },
  })).json();
  assert(operator.store.bytes > 0 && operator.notListed === 0, JSON.stringify(operator));
});

Deno.test("replaying another user's incremental fetch without credentials costs the origin the same whether that state is cached or not", async () => {
  // Failed before: 2 origin calls when alice's state was in the response cache (a tag listing,
  // then the fetch), 1 when not: anyone could tell which wants/haves states were fetched.
  await using origin = await startOrigin({ requireAuth: ALICE });
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
  const { bare } = await makeRepo(origin, REPO, { commits: 6 });
  const commits = (await git(["rev-list", "main"], { cwd: bare })).trim().split("\n");
  const alice = basic(ALICE.user, ALICE.password);
  const url = `${edge.url}/${REPO}`;
  const incremental = (want: string, have: string): (string | "delim" | "flush")[] => [
    "command=fetch\n",
    "agent=git/2.39.5\n",
    "delim",
    "ofs-delta\n",
    "no-progress\n",
    `want ${want}\n`,
    `have ${have}\n`,
    "done\n",
    "flush",
  ];
  const state = incremental(commits[0], commits[3]);
  // Alice fetches: the answer is stored; her second fetch is a hit.
  assertEquals((await command(url, state, { authorization: alice })).status, 200);
  const metric = async (line: string) => {
    const text = await (await fetch(`${edge.url}/_edge/metrics`)).text();
    return Number(text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1] ?? 0);
  };
  const HIT = 'gitedge_response_cache_total{result="hit"}';
  for (let i = 0; i < 50 && await metric(HIT) === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    assertEquals((await command(url, state, { authorization: alice })).status, 200);
  }
  assert(await metric(HIT) > 0, "alice's state is in the cache");
  const calls = async (lines: (string | "delim" | "flush")[]) => {
    origin.stats.reset();
    const res = await command(url, lines);
    return [res.status, origin.stats.requests];
  };
  const cached = await calls(state);
  const never = await calls(incremental(commits[0], commits[4]));
  assertEquals(cached, never, "cached vs never fetched: [status, origin calls]");
  assertEquals(cached[0], 401);
});

Deno.test("a secret removed at the origin is served by no path after a refresh; a purge drops a repository at once", async () => {
  // Failed before: the refresh after the force push layered on the packs built before it, so
  // clones by URIs and bundles still held the secret blob (plain and direct clones did not).
  const bin = await gitBin();
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const token = "purge-t0ken";
  const admin = { authorization: `Bearer ${token}` };
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2, adminToken: token });
  const bare = await origin.createBare(REPO);
  const work = `${dir.path}/work`;
  const inWork = (args: string[]) => git(args, { cwd: work, bin });
  await git(["init", "-q", "-b", "main", work], { bin });
  await Deno.writeTextFile(`${work}/a.txt`, "hello\n");
  await inWork(["add", "a.txt"]);
  await inWork(["commit", "-q", "-m", "a"]);
  await inWork(["checkout", "-q", "-b", "feature"]);
  await Deno.writeTextFile(`${work}/secret.txt`, "AKIA-not-for-anyone-4711\n");
  await inWork(["add", "secret.txt"]);
  await inWork(["commit", "-q", "-m", "oops"]);
  const secret = (await inWork(["rev-parse", "HEAD:secret.txt"])).trim();
  await inWork(["push", "-q", bare, "main", "feature"]);
  await warm(edge, REPO, admin);
  const url = `${edge.url}/${REPO}`;
  const has = async (clone: string) =>
    await gitStatus(["-C", clone, "cat-file", "-e", secret], bin) === 0;
  await git([...URI_CLONE, url, `${dir.path}/before`], { bin });
  assert(await has(`${dir.path}/before`), "the secret was there before (the test's premise)");
  // An incremental fetch of the secret's commit (over main) is stored by the response cache.
  const oldFeature = (await inWork(["rev-parse", "feature"])).trim();
  const oldMain = (await inWork(["rev-parse", "main"])).trim();
  const incremental = [
    "command=fetch\n",
    "agent=git/2.39.5\n",
    "delim",
    "ofs-delta\n",
    "no-progress\n",
    `want ${oldFeature}\n`,
    `have ${oldMain}\n`,
    "done\n",
    "flush",
  ] as (string | "delim" | "flush")[];
  const hits = async () => {
    const text = await (await fetch(`${edge.url}/_edge/metrics`)).text();
    const line = text.split("\n").find((l) =>
      l.startsWith('gitedge_response_cache_total{result="hit"} ')
    );
    return Number(line?.split(" ")[1] ?? 0);
  };
  for (let i = 0; i < 50 && await hits() === 0; i++) {
    assertEquals((await command(url, incremental)).status, 200);
    await new Promise((r) => setTimeout(r, 100));
  }
  assert(await hits() > 0, "the old state's answer is stored");

  // The origin removes it: feature rewritten without the file, history expired and pruned.
  await inWork(["reset", "-q", "--hard", "main"]);
  await Deno.writeTextFile(`${work}/b.txt`, "nothing to see\n");
  await inWork(["add", "b.txt"]);
  await inWork(["commit", "-q", "-m", "b"]);
  await inWork(["push", "-q", "-f", bare, "feature"]);
  await git(["reflog", "expire", "--expire=now", "--all"], { cwd: bare, bin });
  await git(["gc", "-q", "--prune=now"], { cwd: bare, bin });
  assert(await gitStatus(["-C", bare, "cat-file", "-e", secret], bin) !== 0, "gone at the origin");
  await warm(edge, REPO, admin);

  const listUrl = `${edge.url}/_edge/bundle-list/${REPO}`;
  const paths: [string, string[]][] = [
    ["uris", URI_CLONE],
    ["plain", ["clone", "-q"]],
    ["bundle-uri", ["-c", "transfer.bundleURI=true", "clone", "-q"]],
    ["bundle-list", ["clone", "-q", `--bundle-uri=${listUrl}`]],
  ];
  await git(["clone", "-q", "--mirror", origin.repoUrl(REPO), `${dir.path}/direct`], { bin });
  for (const [what, args] of paths) {
    await git([...args, url, `${dir.path}/after-${what}`], { bin });
    assert(!await has(`${dir.path}/after-${what}`), `${what}: the removed secret was served`);
  }
  // The stored answer for the old state is gone with the layers: the origin answers it as it
  // answers a direct fetch of what it no longer has (`not our ref`, its answer cut short).
  const hitsBefore = await hits();
  const replay = await command(url, incremental).catch(() => null);
  assertEquals(await hits(), hitsBefore, "the old state's stored answer was served");
  assert(!replay || !new TextDecoder().decode(replay.body).includes("packfile\n"), "a pack");

  // Purge: the admin token only; then nothing of the repository is left in the store.
  const refused = await fetch(`${edge.url}/_edge/purge/${REPO}`, { method: "POST" });
  await refused.body?.cancel();
  assertEquals(refused.status, 401);
  const purged = await fetch(`${edge.url}/_edge/purge/${REPO}`, { method: "POST", headers: admin });
  const body = await purged.json();
  assertEquals(purged.status, 200, JSON.stringify(body));
  assert(body.purged.objects > 0, JSON.stringify(body));
  assertEquals([...await edge.listStored("repos/"), ...await edge.listStored("cache/")], []);
  // Clones go on (by the origin, and the snapshot is built again from scratch).
  await git([...URI_CLONE, url, `${dir.path}/after-purge`], { bin });
  assert(!await has(`${dir.path}/after-purge`));
  await warm(edge, REPO, admin);
  await git([...URI_CLONE, url, `${dir.path}/rebuilt`], { bin });
  assert(!await has(`${dir.path}/rebuilt`));
  const { HEAD: _, ...direct } = await refsOf(`${dir.path}/direct`);
  const rebuilt = await refsOf(`${dir.path}/rebuilt`);
  for (const [ref, oid] of Object.entries(direct)) {
    const local = ref.replace(/^refs\/heads\//, "refs/remotes/origin/");
    assertEquals(rebuilt[local] ?? rebuilt[ref], oid, ref);
  }
});

Deno.test("the probe fetch goes with the clone's listing, not after its fetch comes: a warm clone waits no extra round trip", async () => {
  await using origin = await startOrigin({ requireAuth: ALICE });
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
  const { refs } = await makeRepo(origin, REPO, { commits: 3 });
  const alice = basic(ALICE.user, ALICE.password);
  await warm(edge, REPO, { "x-origin-authorization": alice });
  const url = `${edge.url}/${REPO}`;
  const headers = { authorization: alice };
  origin.stats.reset();
  const listed = await command(url, ["command=ls-refs\n", "delim", "peel\n", "flush"], headers);
  assertEquals(listed.status, 200);
  for (let i = 0; i < 50 && !origin.stats.commands["fetch-probe"]; i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assertEquals(origin.stats.commands["fetch-probe"], 1, "probed alongside the listing");
  const fetched = await command(url, plainFetch(Object.values(refs)), headers);
  assertEquals(fetched.status, 200);
  assertEquals(
    origin.stats.commands,
    { "ls-refs": 1, "fetch-probe": 1 },
    "the fetch found the origin's word in the memo (streamed, no second probe)",
  );
  // A listing the origin refuses sends no probe (no second failed login for it).
  origin.stats.reset();
  const refused = await command(url, ["command=ls-refs\n", "delim", "peel\n", "flush"], {
    authorization: basic("alice", "wrong"),
  });
  assertEquals(refused.status, 401);
  await new Promise((r) => setTimeout(r, 200));
  assertEquals(origin.stats.requests, 1, JSON.stringify(origin.stats.commands));
});
