/**
 * What the mirror's update costs the origin (edge/deno/mirror.ts, src/proxy/fetch/mirror_ahead.ts):
 * one protocol-v2 `fetch` per new state of the repository, started by the caller's own listing
 * and named by it, so that a clone or a fetch through the edge costs the origin no more requests
 * than going direct; counted at a real `git http-backend` origin, each result compared with the
 * direct one. And a private origin: an update with a refused credential fetches nothing, and its
 * caller gets the origin's 401, never the mirror's bytes.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { type Origin, startOrigin } from "../../support/origin.ts";
import { addCommits, assertSameClone, makeRepo, refsOf } from "../../support/fixtures.ts";
import {
  rawLsRefs,
  rawWantFetch,
  startMirrorEdge as mirrorEdge,
} from "../../support/mirror_edge.ts";
import { warm } from "../../proxy/edge_suite.ts";

const REPO = "w.git";

/** The origin's requests since its last reset: all, `GET info/refs`, `ls-refs`, `fetch`. */
function cost(origin: Origin) {
  const s = origin.stats;
  return {
    requests: s.requests,
    infoRefs: s.log.filter((r) => r.method === "GET" && r.path.endsWith("/info/refs")).length,
    lsRefs: s.commands["ls-refs"] ?? 0,
    fetches: s.commands["fetch"] ?? 0,
    bytes: s.bytesOut,
  };
}

async function metric(edgeUrl: string, line: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return Number(text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1] ?? 0);
}

Deno.test("mirror update: a depth-1 clone of a new tip costs the origin what a direct one does (info/refs, ls-refs, one fetch), and a fraction of its bytes", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  await makeRepo(origin, REPO, { commits: 10 });
  await warm({ url: e.url }, REPO);
  await addCommits(origin, REPO, { commits: 3, tag: "v-tip" });

  origin.stats.reset();
  await git(["clone", "-q", "--depth", "1", origin.repoUrl(REPO), `${dir.path}/direct`]);
  const direct = cost(origin);
  origin.stats.reset();
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/edge`]);
  const edge = cost(origin);
  assertEquals(
    {
      requests: edge.requests,
      infoRefs: edge.infoRefs,
      lsRefs: edge.lsRefs,
      fetches: edge.fetches,
    },
    { requests: 3, infoRefs: 1, lsRefs: 1, fetches: 1 },
    JSON.stringify(origin.stats.log),
  );
  assertEquals(direct.requests, 3);
  assert(
    edge.bytes < direct.bytes * 0.2,
    `origin sent ${edge.bytes} bytes, direct ${direct.bytes}`,
  );
  assert(await metric(e.url, 'gitedge_mirror_total{result="hit"}') >= 1, "the mirror answered");
  // The same clone as direct, the new tag included (the mirror's refs follow the listing).
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
  await git(["fsck", "--full"], { cwd: `${dir.path}/edge` });
});

Deno.test("mirror update: a blobless clone of a new tip and its checkout's lazy fetch cost the origin one pack, and the requests a direct one costs at most", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  await makeRepo(origin, REPO, { commits: 10 });
  await git(["config", "uploadpack.allowFilter", "true"], { cwd: `${origin.root}/${REPO}` });
  await warm({ url: e.url }, REPO);
  await addCommits(origin, REPO, { commits: 3 });

  origin.stats.reset();
  await git(["clone", "-q", "--filter=blob:none", origin.repoUrl(REPO), `${dir.path}/direct`]);
  const direct = cost(origin);
  origin.stats.reset();
  await git(["clone", "-q", "--filter=blob:none", `${e.url}/${REPO}`, `${dir.path}/edge`]);
  await e.edge.idle();
  const edge = cost(origin);
  assertEquals(edge.fetches, 1, "the mirror's update; the lazy fetch is the mirror's");
  assert(edge.requests <= direct.requests, JSON.stringify({ direct, edge }));
  assertEquals(edge.lsRefs, 1, "no ls-refs sent ahead for the lazy fetch's info/refs");
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
  await git(["fsck", "--full"], { cwd: `${dir.path}/edge` });
});

Deno.test("mirror update: git fetch from a new state costs the origin what going direct does; four runners in one new state share one origin fetch", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  await makeRepo(origin, REPO, { commits: 10 });
  await warm({ url: e.url }, REPO);
  // Yesterday's clones: one direct, five through the edge.
  const clone = async (name: string, url: string) => {
    const d = `${dir.path}/${name}`;
    await git(["clone", "-q", origin.repoUrl(REPO), d]);
    await git(["remote", "set-url", "origin", url], { cwd: d });
    return d;
  };
  const direct = await clone("direct", origin.repoUrl(REPO));
  const one = await clone("one", `${e.url}/${REPO}`);
  const runners = await Promise.all(
    [0, 1, 2, 3].map((i) => clone(`r${i}`, `${e.url}/${REPO}`)),
  );

  await addCommits(origin, REPO, { commits: 4, tag: "v-one" });
  origin.stats.reset();
  await git(["fetch", "-q", "origin"], { cwd: direct });
  const directCost = cost(origin);
  origin.stats.reset();
  await git(["fetch", "-q", "origin"], { cwd: one });
  const edgeCost = cost(origin);
  assertEquals(
    { requests: edgeCost.requests, lsRefs: edgeCost.lsRefs, fetches: edgeCost.fetches },
    { requests: directCost.requests, lsRefs: 1, fetches: 1 },
    JSON.stringify(origin.stats.log),
  );
  assert(
    edgeCost.bytes <= directCost.bytes * 1.1,
    `origin sent ${edgeCost.bytes} bytes, direct ${directCost.bytes}`,
  );
  assertEquals(
    (await refsOf(one))["refs/remotes/origin/main"],
    (await refsOf(direct))["refs/remotes/origin/main"],
  );

  // Another new state, four runners at once: one origin fetch for all of them.
  await addCommits(origin, REPO, { commits: 2, tag: "v-four" });
  origin.stats.reset();
  await Promise.all(runners.map((d) => git(["fetch", "-q", "--tags", "origin"], { cwd: d })));
  const burst = cost(origin);
  assertEquals(burst.fetches, 1, JSON.stringify(origin.stats.commands));
  assert(burst.lsRefs <= runners.length, `${burst.lsRefs} ls-refs`);
  assert(burst.requests <= 2 * runners.length + 1, `${burst.requests} requests`);
  await git(["fetch", "-q", "--tags", "origin"], { cwd: direct });
  const want = await refsOf(direct);
  for (const d of runners) {
    const got = await refsOf(d);
    assertEquals(got["refs/remotes/origin/main"], want["refs/remotes/origin/main"]);
    assertEquals(got["refs/tags/v-four"], want["refs/tags/v-four"]);
    await git(["fsck", "--full"], { cwd: d });
  }
});

Deno.test("mirror update: a private origin listing refs to anyone; a refused credential's listing fetches nothing into the mirror, and its fetch gets the origin's 401, before and after the mirror has the state", async () => {
  const auth = { user: "ci", password: "s3cret" };
  await using origin = await startOrigin({ requireAuth: auth, authScope: "fetch" });
  await using e = await mirrorEdge({ origin: origin.url, chunks: 2 });
  const basic = (user: string, password: string) => ({
    authorization: `Basic ${btoa(`${user}:${password}`)}`,
  });
  const good = basic("ci", "s3cret");
  const wrong = basic("ci", "nope");
  await makeRepo(origin, REPO, { commits: 8 });
  await warm({ url: e.url }, REPO, good);
  const { tip } = await addCommits(origin, REPO, { commits: 2 });
  const url = `${e.url}/${REPO}`;
  const updates = () => metric(e.url, "gitedge_mirror_updates_total");

  // The wrong credential's listing (the origin lists refs to anyone) starts an update with it:
  // refused, nothing fetched, and its fetch is the origin's 401.
  assertEquals(await rawLsRefs(url, wrong), 200);
  await e.edge.idle();
  assertEquals(await updates(), 0, "a refused credential brought nothing into the mirror");
  let res = await rawWantFetch(url, tip, wrong);
  assertEquals(res.status, 401);
  assert(!res.pack, "no pack for the refused credential");

  // The good credential's listing brings the state in: one origin fetch, and its fetch served.
  origin.stats.reset();
  assertEquals(await rawLsRefs(url, good), 200);
  res = await rawWantFetch(url, tip, good);
  assertEquals(res.status, 200);
  assert(res.pack, "a pack for the good credential");
  assertEquals(cost(origin).fetches, 1, JSON.stringify(origin.stats.commands));
  assert(await metric(e.url, 'gitedge_mirror_total{result="hit"}') >= 1, "the mirror answered");

  // A newer state: the refused credential's listing starts an update with it (refused again);
  // its fetch of the state the mirror holds is still the origin's 401, never the mirror's. The
  // refresh the good fetch started has ended first: pushed during it, the new commit came in by
  // that build's update (the good credential's), and the refused one's had nothing to ask.
  await e.edge.idle();
  await addCommits(origin, REPO, { commits: 1 });
  assertEquals(await rawLsRefs(url, wrong), 200);
  // Its update has ended (refused) before the fetch: what it recorded is what the fetch finds.
  await e.edge.idle();
  res = await rawWantFetch(url, tip, wrong);
  assertEquals(res.status, 401);
  assert(!res.pack, "no pack for the refused credential, the mirror holding what it asks");
  const anonymous = await rawWantFetch(url, tip, {});
  assertEquals(anonymous.status, 401);
  assert(!anonymous.pack, "no pack for an anonymous caller");
});
