/**
 * A repository warms from the fetches CI makes, not only from clones asking for packfile URIs:
 * a plain `git clone` and, with the git mirror, a depth-1 clone of a repository the edge has no
 * snapshot of start its first build once the origin has served them
 * (src/proxy/fetch/fetch_plan.ts, src/proxy/fetch/mirror_fetch.ts). The next such request is the
 * edge's: streamed from the snapshot, or answered by the mirror seeded from it.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { type Origin, startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { edgeConfigFor } from "../../support/edge.ts";
import { withinDeadline } from "../../support/deadline.ts";

const REPO = "f.git";

async function edgeFor(origin: Origin, mirror: boolean) {
  const store = await Deno.makeTempDir({ prefix: "gitedge-first-build-" });
  const edge = await startDenoEdge({
    store,
    port: 0,
    config: edgeConfigFor({ origin: origin.url }),
    mirror,
    onBuildError: () => {},
  });
  return {
    url: edge.url,
    [Symbol.asyncDispose]: async () => {
      await edge.stop();
      await Deno.remove(store, { recursive: true }).catch(() => {});
    },
  };
}

/** Waits until the edge has a snapshot of `repo` (the build started by a clone runs behind it). */
async function snapshotReady(edgeUrl: string, repo: string): Promise<void> {
  await withinDeadline(
    (async () => {
      for (;;) {
        const res = await fetch(`${edgeUrl}/_edge/status/${repo}`);
        const body = await res.json();
        if (body.snapshot?.state === "ready") return;
        await new Promise((r) => setTimeout(r, 100));
      }
    })(),
    `a snapshot of ${repo}`,
  );
}

Deno.test("first build: a plain clone of a cold repository starts one; the next plain clone is streamed from it", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await edgeFor(origin, false);
  await makeRepo(origin, REPO, { commits: 8 });
  await git(["clone", "-q", "--bare", origin.repoUrl(REPO), `${dir.path}/direct`]);

  await git(["clone", "-q", "--bare", `${e.url}/${REPO}`, `${dir.path}/c1`]);
  await snapshotReady(e.url, REPO);
  origin.stats.reset();
  await git(["clone", "-q", "--bare", `${e.url}/${REPO}`, `${dir.path}/c2`]);
  assertEquals(origin.stats.commands["fetch"] ?? 0, 0, JSON.stringify(origin.stats.commands));
  for (const c of ["c1", "c2"]) {
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/${c}`);
    await git(["fsck", "--full"], { cwd: `${dir.path}/${c}` });
  }
});

Deno.test("first build: with the mirror, a depth-1 clone of a cold repository starts one; the next depth-1 clone is the mirror's", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await using e = await edgeFor(origin, true);
  await makeRepo(origin, REPO, { commits: 8 });
  await git(["clone", "-q", "--depth", "1", origin.repoUrl(REPO), `${dir.path}/direct`]);

  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/c1`]);
  await snapshotReady(e.url, REPO);
  origin.stats.reset();
  await git(["clone", "-q", "--depth", "1", `${e.url}/${REPO}`, `${dir.path}/c2`]);
  const fetches = origin.stats.commands["fetch"] ?? 0;
  assertEquals(fetches, 0, JSON.stringify(origin.stats.commands));
  const metrics = await (await fetch(`${e.url}/_edge/metrics`)).text();
  assert(
    /gitedge_mirror_total\{result="(hit|updated)"\} [1-9]/.test(metrics),
    "the mirror answered",
  );
  for (const c of ["c1", "c2"]) {
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/${c}`);
    await git(["fsck", "--full"], { cwd: `${dir.path}/${c}` });
  }
});
