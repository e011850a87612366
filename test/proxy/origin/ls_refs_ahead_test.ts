/**
 * `ls-refs` sent ahead (src/proxy/origin/ls_refs_ahead.ts) on the Deno server: a clone's `ls-refs` is
 * answered by the one the edge sent the origin alongside its `info/refs`, and the refs are the
 * origin's at the time of that clone.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { addCommits, assertSameClone, makeRepo, refsOf } from "../../support/fixtures.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { modernGit } from "../../support/git_builds.ts";
import { URI_CLONE, warm } from "../edge_suite.ts";
import { encodePkts } from "../../../src/git/pktline.ts";

const REPO = "r.git";

async function gitBin(): Promise<string> {
  const modern = await modernGit();
  return typeof modern === "string" ? "git" : modern.bin;
}

async function metric(edgeUrl: string, line: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return Number(text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1] ?? 0);
}

const USED = 'gitedge_ls_refs_ahead_total{result="used"}';

/** Every ls-refs-ahead count, for a failure's message. */
async function aheadCounts(edgeUrl: string): Promise<string> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith("gitedge_ls_refs_ahead_total")).join(", ");
}

Deno.test("a warm clone's ls-refs is answered by the one sent ahead with its info/refs, with the origin's refs of that moment", async () => {
  const bin = await gitBin();
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
  await makeRepo(origin, REPO, { commits: 8, tags: 2 });
  await warm(edge, REPO);
  // The first clone teaches the edge what a clone's ls-refs looks like.
  await git([...URI_CLONE, `${edge.url}/${REPO}`, `${dir.path}/c0`], { bin });
  assertEquals(await metric(edge.url, USED), 0, "nothing learned before the first");

  for (let i = 1; i <= 2; i++) {
    // The origin moves on between clones: each clone must see the refs of its own time.
    await addCommits(origin, REPO, { commits: 2, tag: `v-late-${i}` });
    origin.stats.reset();
    // An info/refs within 0.5 s of the same credential's last ls-refs sends nothing ahead (a
    // gitedge clone sends both at once): clones of a fast machine come that close.
    await new Promise((r) => setTimeout(r, 600));
    await git([...URI_CLONE, `${edge.url}/${REPO}`, `${dir.path}/c${i}`], { bin });
    assertEquals(
      await metric(edge.url, USED),
      i,
      `clone ${i}'s ls-refs came from the one ahead (${await aheadCounts(edge.url)})`,
    );
    await withinDeadline(edge.settled(REPO, (s) => s.state === "ready"), "the refresh");
    // The clone's (the one sent ahead) and the snapshot refresh's it started: none twice.
    assertEquals(origin.stats.commands["ls-refs"], 2, JSON.stringify(origin.stats.commands));
    await git(["clone", "-q", `${origin.url}/${REPO}`, `${dir.path}/d${i}`], { bin });
    await assertSameClone(`${dir.path}/d${i}`, `${dir.path}/c${i}`);
    assert((await refsOf(`${dir.path}/c${i}`))[`refs/tags/v-late-${i}`], "the new tag is there");
  }
});

Deno.test("ls-refs ahead off (--ls-refs-ahead 0): every ls-refs goes to the origin", async () => {
  const bin = await gitBin();
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({
    origin: origin.url,
    chunks: 2,
    lsRefsAheadSeconds: 0,
  });
  await makeRepo(origin, REPO, { commits: 4 });
  for (let i = 0; i < 2; i++) {
    await git([...URI_CLONE, `${edge.url}/${REPO}`, `${dir.path}/c${i}`], { bin });
  }
  assertEquals(await metric(edge.url, USED), 0);
});

Deno.test("back-to-back listings each get their ls-refs ahead, with the refs of their own time", async () => {
  // Fails without ls_refs_ahead.ts noting info/refs times: an ls-refs that found nothing ahead
  // (the first) marked the credential "early", so the next info/refs within 0.5 s sent nothing
  // ahead, whose ls-refs marked it again: back-to-back clones (a CI's) never got one.
  const bin = await gitBin();
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url });
  await makeRepo(origin, REPO, { commits: 3 });
  const url = `${edge.url}/${REPO}`;
  await git(["ls-remote", url], { bin }); // learns the request
  for (let i = 0; i < 3; i++) await git(["ls-remote", url], { bin });
  assertEquals(await metric(edge.url, USED), 3, await aheadCounts(edge.url));
  // A ref made at the origin just before a listing is in it.
  const head = (await git(["rev-parse", "HEAD"], { cwd: `${origin.root}/${REPO}` })).trim();
  await git(["update-ref", "refs/heads/just-now", head], { cwd: `${origin.root}/${REPO}` });
  const listed = await git(["ls-remote", url], { bin });
  assert(listed.includes("refs/heads/just-now"), listed);
  assertEquals(await metric(edge.url, USED), 4, await aheadCounts(edge.url));
});

Deno.test("concurrent clones of one credential each get an ls-refs ahead, none older than its own info/refs", async () => {
  // Fails without the count of clones an answer stands for: the second info/refs replaced the
  // first's answer and the first ls-refs took it, so the others went to the origin (1 of 3 used).
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url });
  const { bare } = await makeRepo(origin, REPO, { commits: 3 });
  const headers = { "git-protocol": "version=2", "user-agent": "test/concurrent" };
  const infoRefs = async () => {
    const res = await fetch(`${edge.url}/${REPO}/info/refs?service=git-upload-pack`, { headers });
    assertEquals(res.status, 200);
    await res.body?.cancel();
  };
  const LS_REFS = encodePkts([
    "command=ls-refs\n",
    "delim",
    "peel\n",
    "ref-prefix refs/heads/\n",
    "flush",
  ]) as Uint8Array<ArrayBuffer>;
  const lsRefs = async () => {
    const res = await fetch(`${edge.url}/${REPO}/git-upload-pack`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/x-git-upload-pack-request" },
      body: LS_REFS,
    });
    assertEquals(res.status, 200);
    return await res.text();
  };
  await infoRefs();
  await lsRefs(); // learns the request
  await new Promise((r) => setTimeout(r, 600)); // past the "sent with its info/refs" window
  const head = (await git(["rev-parse", "HEAD"], { cwd: bare })).trim();
  await git(["update-ref", "refs/heads/before-all", head], { cwd: bare });
  // Three clones' info/refs, then their three ls-refs.
  for (let i = 0; i < 3; i++) await infoRefs();
  const listings = await Promise.all([lsRefs(), lsRefs(), lsRefs()]);
  assertEquals(await metric(edge.url, USED), 3, await aheadCounts(edge.url));
  for (const l of listings) assert(l.includes("refs/heads/before-all"), l);
  // A fourth ls-refs has no info/refs of its own left: it goes to the origin.
  await lsRefs();
  assertEquals(await metric(edge.url, USED), 3, await aheadCounts(edge.url));
});
