/**
 * Faults of a fleet of Deno edges on one S3 store (`s3rver`, an S3 emulator from npm) with
 * `redis-server` as coordinator: a node killed (SIGKILL) in the middle of a build and its upload,
 * the coordinator gone for a while, a node drained while it builds. Real `gitedge serve`
 * processes where a node must die, in-process edges elsewhere; real `git http-backend` origin.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { startFleet } from "../../support/fleet.ts";
import { redisMissing, startRedis } from "../../support/redis_server.ts";
import { startS3Emulator } from "../../support/s3_emulator.ts";
import { startRelay } from "../../support/relay.ts";
import { startServeProcess } from "../../support/serve_process.ts";
import { skipped } from "../../support/skips.ts";
import { URI_CLONE } from "../../support/traced_git.ts";
import { repoId } from "../../../src/proxy/core/repo.ts";
import { manifestKey } from "../../../src/proxy/core/store_layout.ts";
import { buildLease, publishedCounter } from "../../../src/proxy/snapshots/fleet_coordinator.ts";
import { RedisFleetState } from "../../../edge/deno/redis_fleet.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { edgeConfigFor } from "../../support/edge.ts";

const REPO = "team/r.git";
const SPEC = { commits: 10, branches: 2, tags: 1, binaryBytes: 300_000, deltaFileRevisions: 3 };
const LEAKY = { sanitizeResources: false, sanitizeOps: false };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

const missing = await redisMissing();
if (missing) skipped("fleet_faults_test", "redis-server is not installed (.ci/run installs it)");

/** Polls `check` every 50 ms until it holds. */
async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = 30_000,
): Promise<void> {
  await withinDeadline(
    (async () => {
      while (!await check()) await sleep(50);
    })(),
    what,
    ms,
  );
}

/** The origin's upload-pack answers stall after 20 KB for `ms`: a build caught mid-fetch. */
const stallFetches = (ms: number) => ({
  [`/${REPO}/git-upload-pack`]: { kind: "stall" as const, afterBytes: 20_000, ms, times: 4 },
});

Deno.test({
  name:
    "fleet: the building node killed (SIGKILL) mid-build: another takes the lease over when it expires and publishes; the killed build publishes nothing",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await makeRepo(origin, REPO, SPEC);
    await git(["clone", "-q", "--mirror", `${origin.url}/${REPO}`, `${dir.path}/direct`]);
    await using relay = await startRelay(origin.url);
    await using s3 = await startS3Emulator();
    await using redis = await startRedis();
    const store = "s3://gitedge/killed";
    const signingKey = crypto.getRandomValues(new Uint8Array(32));
    const id = repoId(`${relay.url}/${REPO}`);
    await using state = new RedisFleetState({ url: redis.url, namespace: store });
    await state.connect();

    // Node A: a real `gitedge serve`, S3 and Redis from its environment, as an operator runs it.
    await using a = await startServeProcess(
      ["--origin", relay.url, "--store", store, "--lease-seconds", "2"],
      {
        env: {
          AWS_ENDPOINT_URL_S3: s3.endpoint,
          AWS_ACCESS_KEY_ID: "S3RVER",
          AWS_SECRET_ACCESS_KEY: "S3RVER",
          AWS_REGION: "us-east-1",
          GITEDGE_S3_PATH_STYLE: "on",
          GITEDGE_COORDINATOR: redis.url,
          GITEDGE_SIGNING_KEY: hex(signingKey),
        },
      },
    );
    relay.setFaults(stallFetches(60_000));
    const warming = fetch(`${a.url}/_edge/warm/${REPO}`, { method: "POST" })
      .then((r) => r.body?.cancel(), () => {});
    await until(async () => await state.holder(buildLease(id)) !== null, "node A's lease");
    await until(() => relay.stats.bytesOut > 20_000, "node A's build fetching");
    await sleep(300);
    Deno.kill(a.pid, "SIGKILL");
    await a.exited();
    await warming;
    relay.setFaults({});

    await using b = await startDenoEdge({
      store,
      port: 0,
      s3Client: s3.client,
      coordinator: redis.url,
      signingKey,
      config: edgeConfigFor({ origin: relay.url }),
      leaseSeconds: 2,
    });
    const killedAt = Date.now();
    const warmed = await withinDeadline(
      fetch(`${b.url}/_edge/warm/${REPO}`, { method: "POST" }).then((r) => r.json()),
      "node B's build",
    );
    const took = Date.now() - killedAt;
    assertEquals(warmed.snapshot.state, "ready", JSON.stringify(warmed));
    assert(took < 2000 + 15_000, `node B finished ${took} ms after the kill`);
    assertEquals(await state.count(publishedCounter(id)), 1, "only B's build was published");
    const left = await s3.store("killed").list(`repos/${id}/tmp/`);
    assertEquals(left.map((o) => o.key), [], "the killed build's temporary objects are gone");
    await git([...URI_CLONE, "--mirror", `${b.url}/${REPO}`, `${dir.path}/via-b`]);
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/via-b`);
  },
});

Deno.test({
  name:
    "fleet: the coordinator gone for a while: known snapshots still served, cold clones pass through, nothing published; builds resume when it is back",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await makeRepo(origin, REPO, SPEC);
    await makeRepo(origin, "team/cold.git", { ...SPEC, commits: 6 });
    for (const r of [REPO, "team/cold.git"]) {
      await git(["clone", "-q", "--mirror", `${origin.url}/${r}`, `${dir.path}/direct-${r}`]);
    }
    await using fleet = await startFleet(2, { origin: origin.url, chunks: 2 });
    const warmed = await (await fetch(`${fleet.nodes[0]!.url}/_edge/warm/${REPO}`, {
      method: "POST",
    })).json();
    assertEquals(warmed.snapshot.state, "ready");
    origin.stats.reset();

    await fleet.redis.kill();
    for (const i of [0, 1]) {
      await git([...URI_CLONE, "--mirror", `${fleet.front.url}/${REPO}`, `${dir.path}/warm${i}`]);
      await assertSameClone(`${dir.path}/direct-${REPO}`, `${dir.path}/warm${i}`);
    }
    // A fetch landing on another node than its ls-refs is rewritten (that node has not seen the
    // client authorised): the origin answers it with an empty pack, never the full one.
    assert(
      origin.stats.bytesOut < 60_000,
      `the known snapshot served both: ${origin.stats.bytesOut} bytes from the origin`,
    );
    const cold = "team/cold.git";
    await git([...URI_CLONE, "--mirror", `${fleet.front.url}/${cold}`, `${dir.path}/cold`]);
    await assertSameClone(`${dir.path}/direct-${cold}`, `${dir.path}/cold`);
    await fleet.idle();
    // Asked to build now, a node says why it cannot (and the client may retry).
    const refused = await fetch(`${fleet.nodes[1]!.url}/_edge/warm/${cold}`, { method: "POST" });
    const text = await refused.text();
    assertEquals(refused.status, 503, text);
    assert(/coordinator is unreachable/.test(text), text);
    const coldId = repoId(`${origin.url}/${cold}`);
    const prefix = fleet.store.slice("s3://gitedge/".length);
    const shared = fleet.s3.store(prefix);
    const key = manifestKey(coldId);
    assertEquals(await shared.head(key), null, "nothing published without the coordinator");

    await fleet.redis.restart();
    let status: { snapshot: { state: string } } | undefined;
    await until(async () => {
      const r = await fetch(`${fleet.nodes[1]!.url}/_edge/warm/${cold}`, { method: "POST" });
      // Until the node's client is connected again the warm fails (the build has no lease).
      if (!r.ok) {
        await r.body?.cancel();
        return false;
      }
      status = await r.json();
      return status?.snapshot.state === "ready";
    }, "a build once the coordinator is back");
    assert(await shared.head(key) !== null, "published");
    await git([...URI_CLONE, "--mirror", `${fleet.front.url}/${cold}`, `${dir.path}/cold2`]);
    await assertSameClone(`${dir.path}/direct-${cold}`, `${dir.path}/cold2`);
  },
});

Deno.test({
  name:
    "fleet: a node drained mid-build gives its lease up at once: another builds and publishes well within the lease; the drained node's late publish is fenced off",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await makeRepo(origin, REPO, SPEC);
    await git(["clone", "-q", "--mirror", `${origin.url}/${REPO}`, `${dir.path}/direct`]);
    await using relay = await startRelay(origin.url);
    const leaseMs = 20_000;
    await using fleet = await startFleet(2, { origin: relay.url, chunks: 2, leaseMs });
    const id = repoId(`${relay.url}/${REPO}`);
    await using state = new RedisFleetState({ url: fleet.redis.url, namespace: fleet.store });
    await state.connect();

    relay.setFaults(stallFetches(4000));
    const first = fleet.nodes[0]!;
    const warming = fetch(`${first.url}/_edge/warm/${REPO}`, { method: "POST" })
      .then((r) => r.body?.cancel(), () => {});
    await until(async () => await state.holder(buildLease(id)) !== null, "node 0's lease");
    await until(() => relay.stats.bytesOut > 20_000, "node 0's build fetching");
    relay.setFaults({});
    await first.drain({ timeoutMs: 300, quietMs: 50 });
    fleet.nodes[0] = null;
    const drainedAt = Date.now();
    const warmed = await (await fetch(`${fleet.nodes[1]!.url}/_edge/warm/${REPO}`, {
      method: "POST",
    })).json();
    assertEquals(warmed.snapshot.state, "ready");
    const took = Date.now() - drainedAt;
    assert(took < leaseMs / 2, `taken over ${took} ms after the drain, not at the lease's end`);
    const shared = fleet.s3.store(fleet.store.slice("s3://gitedge/".length));
    const key = manifestKey(id);
    const published = await shared.head(key);
    await warming;
    // Node 0's build wakes from its stall and tries to publish: refused, as it holds no lease.
    await withinDeadline(first.idle(), "node 0's build");
    const repo = { id, originUrl: `${relay.url}/${REPO}`, path: REPO };
    const zombie = await first.coordinator.status(repo);
    assert(/lease/.test(zombie.lastError ?? ""), `node 0's build fenced off: ${zombie.lastError}`);
    assertEquals((await shared.head(key))?.version, published?.version, "node 1's manifest stays");
    assertEquals(await state.count(publishedCounter(id)), 1, "one publish");
    await git([...URI_CLONE, "--mirror", `${fleet.front.url}/${REPO}`, `${dir.path}/after`]);
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/after`);
  },
});

Deno.test({
  name:
    "fleet: a node killed (SIGKILL) mid-stream: that clone fails, the same clone through another node equals a direct one, the store is untouched",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await makeRepo(origin, REPO, { ...SPEC, binaryBytes: 1_500_000 });
    await git(["clone", "-q", "--mirror", `${origin.url}/${REPO}`, `${dir.path}/direct`]);
    await using s3 = await startS3Emulator();
    await using redis = await startRedis();
    const store = "s3://gitedge/stream";
    const env = {
      AWS_ENDPOINT_URL_S3: s3.endpoint,
      AWS_ACCESS_KEY_ID: "S3RVER",
      AWS_SECRET_ACCESS_KEY: "S3RVER",
      AWS_REGION: "us-east-1",
      GITEDGE_S3_PATH_STYLE: "on",
      GITEDGE_COORDINATOR: redis.url,
      GITEDGE_SIGNING_KEY: hex(crypto.getRandomValues(new Uint8Array(32))),
    };
    const args = ["--origin", origin.url, "--store", store];
    // Node A reads the store over a slow link: its answers stream out as slowly.
    await using slowStore = await startRelay(s3.endpoint, { bytesPerSecond: 150_000 });
    await using a = await startServeProcess(args, {
      env: { ...env, AWS_ENDPOINT_URL_S3: slowStore.url },
    });
    await using b = await startServeProcess(args, { env });
    const warmed = await (await fetch(`${b.url}/_edge/warm/${REPO}`, { method: "POST" })).json();
    assertEquals(warmed.snapshot.state, "ready");
    const snapshotObjects = async () =>
      (await s3.store("stream").list("repos/")).filter((o) => !o.key.endsWith("/state.json"))
        .map((o) => `${o.key} ${o.version}`);
    const before = await snapshotObjects();
    const clone = git(["clone", "-q", "--mirror", `${a.url}/${REPO}`, `${dir.path}/cut`])
      .then(() => "finished", (e) => `failed: ${e}`);
    await until(() => slowStore.stats.bytesOut > 300_000, "the stream under way");
    Deno.kill(a.pid, "SIGKILL");
    await a.exited();
    assert((await clone).startsWith("failed"), "the cut clone fails rather than ending short");
    await git(["clone", "-q", "--mirror", `${b.url}/${REPO}`, `${dir.path}/retry`]);
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/retry`);
    assertEquals(await snapshotObjects(), before, "the snapshot's objects as they were");
  },
});
