/**
 * A fleet of three Deno edges on one S3 store (`s3rver`, an S3 emulator from npm: no real
 * S3-compatible server installs here) and one `redis-server`, behind a round-robin front whose
 * URL the pack URIs name (so a clone's pack downloads are served by other nodes than the one
 * that signed them). Real `git http-backend` origin, stock git clients.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { modernGit } from "../../support/git_builds.ts";
import { URI_CLONE } from "../../support/traced_git.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { startFleet } from "../../support/fleet.ts";
import { redisMissing } from "../../support/redis_server.ts";
import { skipped } from "../../support/skips.ts";
import { repoId } from "../../../src/proxy/core/repo.ts";

const REPO = "team/r.git";
const SPEC = { commits: 12, branches: 2, tags: 2, binaryBytes: 200_000, deltaFileRevisions: 4 };
/** Concurrent clones per storm (the 30; each a stock git process). */
const STORM = 30;
// The SDK's and redis client's sockets outlive single tests; the servers run in other processes.
const LEAKY = { sanitizeResources: false, sanitizeOps: false };

async function gitBin(): Promise<string> {
  const modern = await modernGit();
  return typeof modern === "string" ? "git" : modern.bin;
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/_edge/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
}

const missing = await redisMissing();
if (missing) skipped("fleet_test", "redis-server is not installed (.ci/run installs it)");

Deno.test({
  name:
    "fleet of 3 on one S3 store, clocks 4 s apart: 30 cold clones -> one build, at most one origin pack per node; 30 warm clones -> no origin pack; every clone equals a direct clone",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    const bin = await gitBin();
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await makeRepo(origin, REPO, SPEC);
    await git(["clone", "-q", "--mirror", `${origin.url}/${REPO}`, `${dir.path}/direct`], { bin });
    // The nodes' clocks are seconds apart: leases are kept on the coordinator's clock.
    await using fleet = await startFleet(3, {
      origin: origin.url,
      chunks: 2,
      clockSkewMs: [0, 4000, -4000],
    });
    origin.stats.reset();

    const storm = (label: string) =>
      Promise.all(
        Array.from({ length: STORM }, (_, i) =>
          git(
            [...URI_CLONE, "--mirror", `${fleet.front.url}/${REPO}`, `${dir.path}/${label}${i}`],
            {
              bin,
            },
          )),
      );

    await withinDeadline(storm("cold"), "the cold storm", 240_000);
    await withinDeadline(fleet.idle(), "the builds");
    assertEquals(fleet.buildErrors.flat(), [], "no build failed");
    const id = repoId(`${origin.url}/${REPO}`);
    assertEquals(await fleet.published(id), 1, "one snapshot published for the fleet");
    const coldPacks = origin.stats.commands.fetch ?? 0;
    assert(coldPacks <= 3, `origin packs for the cold storm: ${coldPacks} (at most one per node)`);
    // Every node serves the one snapshot.
    for (const node of fleet.nodes) {
      const status = await (await fetch(`${node!.url}/_edge/status/${REPO}`)).json();
      assertEquals(status.snapshot.state, "ready", `node ${node!.url}`);
    }

    const urisBefore = (await Promise.all(
      fleet.nodes.map((n) => metric(n!.url, "gitedge_packfile_uris_total")),
    )).reduce((a, b) => a + b, 0);
    await withinDeadline(storm("warm"), "the warm storm", 240_000);
    assertEquals(origin.stats.commands.fetch ?? 0, coldPacks, "no origin pack for warm clones");
    const served = await Promise.all(
      fleet.nodes.map((n) => metric(n!.url, "gitedge_packfile_uris_total")),
    );
    assert(
      served.reduce((a, b) => a + b, 0) > urisBefore && served.every((n) => n > 0),
      `every node handed out pack URIs: ${served}`,
    );
    assertEquals(await fleet.published(id), 1, "warm clones built nothing");

    for (const label of ["cold", "warm"]) {
      for (let i = 0; i < STORM; i++) {
        await assertSameClone(`${dir.path}/direct`, `${dir.path}/${label}${i}`);
      }
    }
    await git(["fsck", "--full"], { cwd: `${dir.path}/warm0`, bin });
  },
});

Deno.test({
  name:
    "fleet of 3 on one S3 store: the store cap holds fleet-wide when each node builds a different repository",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using origin = await startOrigin();
    const repos = ["a/one.git", "a/two.git", "a/three.git"];
    for (const [i, r] of repos.entries()) {
      await makeRepo(origin, r, { ...SPEC, commits: 6, seed: 100 + i });
    }
    const cap = 700_000;
    await using fleet = await startFleet(3, { origin: origin.url, chunks: 2, storeMaxBytes: cap });
    const shared = fleet.s3.store(fleet.store.slice("s3://gitedge/".length));
    const snapshotBytes = async () =>
      (await shared.list("repos/")).filter((o) => !o.key.endsWith("/state.json"))
        .reduce((n, o) => n + o.size, 0);
    await using dir = await tempDir();
    const bin = await gitBin();
    for (const [i, r] of repos.entries()) {
      // A clone through node i: its first build there, then that node's sweep.
      await git([...URI_CLONE, `${fleet.nodes[i]!.url}/${r}`, `${dir.path}/${i}`], { bin });
      await withinDeadline(fleet.idle(), "builds and sweeps");
    }
    const bytes = await snapshotBytes();
    assert(bytes <= cap, `${bytes} bytes of snapshots in the store, cap ${cap}`);
    const kept = [];
    for (const r of repos) {
      const id = repoId(`${origin.url}/${r}`);
      if ((await shared.list(`repos/${id}/packs/`)).length > 0) kept.push(r);
    }
    assert(kept.length >= 1 && kept.length < repos.length, `snapshots kept: ${kept}`);
    assert(kept.includes("a/three.git"), "the one built last is kept");
  },
});
