/**
 * The `gitedge clone` CLI against the real Deno edge in front of a `git http-backend` origin:
 * packs by URI after a warm, all inline before, a stale snapshot after the origin moves on, and
 * faulty pack downloads through a relay.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { type CloneJson, cloneJson } from "../support/cli_process.ts";
import { git, tempDir } from "../support/git.ts";
import { type Origin, startOrigin } from "../support/origin.ts";
import { addCommits, assertSameClone, makeRepo, refsOf } from "../support/fixtures.ts";
import { denoEdgeFactory, type EdgeUnderTest } from "../support/edge.ts";
import { startRelay } from "../support/relay.ts";
import { warm } from "../proxy/edge_suite.ts";

const REPO = "team/r.git";
const SPEC = { commits: 20, branches: 2, tags: 2, binaryBytes: 600_000, deltaFileRevisions: 20 };

interface SnapshotPack {
  hash: string;
  bytes: number;
}

/** The pack hashes of a warm response's snapshot, sorted. */
function snapshotHashes(snapshot: Record<string, unknown>): string[] {
  return (snapshot.packs as SnapshotPack[]).map((p) => p.hash).sort();
}

function packHashes(summary: CloneJson): string[] {
  return summary.packs.map((p) => p.hash).sort();
}

/** A stock `git clone` straight from the origin, and a check that `ours` matches it. */
async function assertSameAsOrigin(origin: Origin, ours: string, theirs: string): Promise<void> {
  await git(["clone", "-q", origin.repoUrl(REPO), theirs]);
  await assertSameClone(ours, theirs);
  await git(["fsck", "--full"], { cwd: ours });
}

Deno.test({
  name: "gitedge clone via the Deno edge: inline before warm, by URI after, stale snapshot",
  fn: async (t) => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 4 });
    await makeRepo(origin, REPO, SPEC);
    const url = `${edge.url}/${REPO}`;
    const d = dir.path;

    await t.step("before any warm: everything inline", async () => {
      const summary = await cloneJson([url, `${d}/cold`], d);
      assertEquals(summary.packs, [], "no packs by URI");
      assertEquals(summary.bytesByUri, 0);
      assert(summary.bytesInline > 600_000, `inline ${summary.bytesInline}`);
      await assertSameAsOrigin(origin, `${d}/cold`, `${d}/cold-git`);
    });

    let snapshot: Record<string, unknown> = {};
    await t.step("after warm (4 chunks): the snapshot's packs by URI", async () => {
      snapshot = await warm(edge, REPO);
      assertEquals(snapshot.state, "ready", "snapshot state");
      const hashes = snapshotHashes(snapshot);
      assertEquals(hashes.length, 4, "four chunks");
      const summary = await cloneJson(["--jobs", "4", url, `${d}/warm`], d);
      assertEquals(packHashes(summary), hashes, "packs by URI are the snapshot's");
      assert(
        summary.bytesByUri > summary.bytesInline,
        `by URI ${summary.bytesByUri}, inline ${summary.bytesInline}`,
      );
      const total = (snapshot.packs as SnapshotPack[]).reduce((n, p) => n + p.bytes, 0);
      assertEquals(summary.bytesByUri, total, "bytes by URI = snapshot size");
      // --json says where the time went: every step, each ending within the clone.
      const steps = ["connect", "lsRefs", "fetchResponse", "inlineIndexed", "uriPacks"];
      for (const step of [...steps, "connectivity", "finish"]) {
        const at = summary.phases?.[step];
        assert(at !== undefined && at >= 0 && at <= summary.seconds, `${step}: ${at}`);
      }
      const ends = steps.slice(0, 3).map((s) => summary.phases![s]);
      assertEquals(ends, [...ends].sort((a, b) => a - b), "connect, ls-refs, fetch in order");
      await assertSameAsOrigin(origin, `${d}/warm`, `${d}/warm-git`);
    });

    await t.step("the origin moves on: stale snapshot, then git fetch and pull", async () => {
      await addCommits(origin, REPO, { commits: 3, tag: "v9" });
      const summary = await cloneJson([url, `${d}/stale`], d);
      assertEquals(packHashes(summary), snapshotHashes(snapshot), "old snapshot packs");
      assert(summary.bytesInline > 0, "the difference came inline");
      await assertSameAsOrigin(origin, `${d}/stale`, `${d}/stale-git`);

      const moved = await addCommits(origin, REPO, { commits: 2 });
      await git(["fetch", "-q", "origin"], { cwd: `${d}/stale` });
      await git(["pull", "-q", "--ff-only"], { cwd: `${d}/stale` });
      const head = (await git(["rev-parse", "HEAD"], { cwd: `${d}/stale` })).trim();
      assertEquals(head, moved.tip, "pulled to the origin's new main");
      const remoteRefs = await refsOf(`${d}/stale`);
      assertEquals(remoteRefs["refs/remotes/origin/main"], moved.tip, "origin/main fetched");
      await git(["fsck", "--full"], { cwd: `${d}/stale` });
    });
  },
});

Deno.test({
  name: "gitedge clone survives a truncated and a 503 pack download through a relay",
  fn: async () => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await makeRepo(origin, REPO, SPEC);
    // The relay must know the edge's URL and the edge the relay's: the relay starts first and
    // reads the edge's URL per request.
    let edgeUrl = "";
    await using relay = await startRelay(() => edgeUrl, {
      faults: {
        "*": [
          { kind: "truncate", afterBytes: 20_000, times: 1 },
          { kind: "status", status: 503, times: 1 },
        ],
      },
    });
    await using edge: EdgeUnderTest = await denoEdgeFactory({
      origin: origin.url,
      chunks: 4,
      publicUrl: relay.url,
    });
    edgeUrl = edge.url;
    const snapshot = await warm(edge, REPO);

    const summary = await cloneJson(
      ["--jobs", "4", `${edge.url}/${REPO}`, `${dir.path}/ours`],
      dir.path,
    );
    assertEquals(packHashes(summary), snapshotHashes(snapshot), "packs by URI");
    const retries = summary.packs.reduce((n, p) => n + p.retries, 0);
    assert(retries >= 2, `retries ${retries}`);
    const packRequests = Object.entries(relay.stats.byPath)
      .filter(([key]) => key.includes("/_edge/packs/"))
      .reduce((n, [, s]) => n + s.requests, 0);
    assertEquals(packRequests, 4 + retries, "every pack request went through the relay");
    await assertSameAsOrigin(origin, `${dir.path}/ours`, `${dir.path}/theirs`);
  },
});
