/**
 * Refresh layers and first builds packed from the edge's git mirror (src/proxy/snapshots/
 * snapshot.ts `LocalPacker`, src/proxy/mirror/mirrors.ts `packFor`, edge/deno/mirror.ts `pack`):
 * once the mirror holds the new tips, the origin does not send those objects a second time for
 * the snapshot. The origin's bytes are counted at a real `git http-backend`; every clone is
 * compared with a direct one.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, gitBytes, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { type MirrorEdgeOptions, startMirrorEdge } from "../../support/mirror_edge.ts";
import { URI_CLONE, warm } from "../../proxy/edge_suite.ts";
import { tracedGit, urisFetched } from "../../support/traced_git.ts";
import { pushCommits } from "../../support/pushed.ts";
import type { Logger, LogLevel } from "../../../src/proxy/core/log.ts";
import { modernGit } from "../../support/git_builds.ts";
import { skipped } from "../../support/skips.ts";

const REPO = "l.git";

const mirrorEdge = (origin: string, opts: MirrorEdgeOptions = {}) =>
  startMirrorEdge({ origin, chunks: 2, ...opts });

async function metric(edgeUrl: string, line: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return Number(text.split("\n").find((l) => l.startsWith(`${line} `))?.split(" ")[1] ?? 0);
}

Deno.test("mirror layers: a refresh after a push packs the new objects from the mirror: the origin sends them once, and a URI clone equals a direct one", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const events: { level: LogLevel; event: string; fields?: Record<string, unknown> }[] = [];
  const log: Logger = {
    enabled: () => true,
    log: (level, event, fields) => void events.push({ level, event, fields }),
  };
  await using e = await mirrorEdge(origin.url, { log });
  await makeRepo(origin, REPO, { commits: 12 });
  // The first clone's build; the mirror is seeded from the snapshot it publishes.
  await warm(e, REPO);
  await e.edge.idle();
  const pushed = await pushCommits(origin, REPO, dir.path);
  origin.stats.reset();
  // A plain clone of the new tips: the mirror's update answers it, and a refresh starts.
  await git(["clone", "-q", "--bare", `${e.url}/${REPO}`, `${dir.path}/plain`]);
  await e.edge.idle();
  const status = (await (await fetch(`${e.url}/_edge/status/${REPO}`)).json()).snapshot;
  assert(status.tips.includes(pushed.tip), `the refresh published: ${JSON.stringify(status)}`);
  // The origin sent the new objects once (the mirror's update), plus listings: not a second
  // pack of them for the refresh.
  const sent = origin.stats.bytesOut;
  assert(
    sent < 1.5 * pushed.packBytes,
    `origin sent ${sent} bytes for ${pushed.packBytes} bytes of new objects: ` +
      JSON.stringify(origin.stats.commands),
  );
  assert(sent >= pushed.packBytes, `origin sent ${sent}: the mirror's update is counted`);
  // Its fetch commands: the mirror's update and the refresh's check for dropped objects (an empty
  // pack); the refresh's own pack of the new objects is gone.
  assertEquals(origin.stats.commands["fetch"], 2, JSON.stringify(origin.stats.commands));
  assertEquals(await metric(e.url, "gitedge_mirror_layers_total"), 1, "the layer from the mirror");
  // The operator sees it: the mirror's state, size and last update, the layer and its bytes, the
  // disk (metrics, page, log).
  const repos = await (await fetch(`${e.url}/_edge/repos`)).json();
  const row = repos.repositories.find((r: { path: string }) => r.path === REPO);
  assertEquals(row.mirror.state, "ready", JSON.stringify(row.mirror));
  assert(row.mirror.bytes > 0 && row.mirror.updatedAt !== null, JSON.stringify(row.mirror));
  assertEquals(repos.mirrors.layers, 1, JSON.stringify(repos.mirrors));
  // Just the new objects: the snapshot's tips were its haves.
  assert(
    repos.mirrors.layerBytes >= pushed.packBytes / 2 &&
      repos.mirrors.layerBytes < 1.5 * pushed.packBytes,
    `layer ${repos.mirrors.layerBytes} bytes, new objects ${pushed.packBytes}`,
  );
  assert(repos.mirrors.diskBytes >= row.mirror.bytes, JSON.stringify(repos.mirrors));
  assertEquals(await metric(e.url, "gitedge_mirrors"), 1);
  assertEquals(await metric(e.url, "gitedge_mirror_disk_bytes"), repos.mirrors.diskBytes);
  assertEquals(await metric(e.url, "gitedge_mirror_layer_bytes_total"), repos.mirrors.layerBytes);
  assertEquals(
    await metric(e.url, 'gitedge_origin_bytes_saved_total{path="layer"}'),
    repos.mirrors.layerBytes,
    "counted as bytes the origin did not send",
  );
  assert(row.originBytesSaved >= repos.mirrors.layerBytes, "and the repository's");
  const page = await (await fetch(`${e.url}/_edge/`)).text();
  assert(page.includes("1 snapshot layers"), "the page's mirror card");
  const layerLog = events.find((r) => r.event === "mirror.layer" && r.fields?.packed === true);
  assertEquals(layerLog?.fields?.bytes, repos.mirrors.layerBytes, JSON.stringify(layerLog));
  // A clone by URIs now takes the layer packed from the mirror, and equals a direct clone.
  await git(["clone", "-q", "--bare", origin.repoUrl(REPO), `${dir.path}/direct`]);
  const trace = await tracedGit([...URI_CLONE, "--bare", `${e.url}/${REPO}`, `${dir.path}/uri`]);
  assertEquals(urisFetched(trace).length, status.packs.length, "every pack of both layers");
  assert(status.packs.length >= 2, `two layers: ${JSON.stringify(status.packs)}`);
  await git(["fsck", "--full"], { cwd: `${dir.path}/uri` });
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/uri`);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/plain`);
});

Deno.test("mirror layers: a first build where the mirror holds the repository and no snapshot does is packed from the mirror, not a full clone from the origin", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const mirrorDir = `${dir.path}/mirrors`;
  await makeRepo(origin, REPO, { commits: 12, binaryBytes: 512 * 1024 });
  {
    // An edge whose store goes (its mirror directory stays, on another disk).
    await using first = await mirrorEdge(origin.url, { mirrorDir });
    await warm(first, REPO);
    await first.edge.idle();
  }
  const pushed = await pushCommits(origin, REPO, dir.path, 3, 16 * 1024);
  const full = (await gitBytes(["pack-objects", "--all", "--stdout", "-q"], {
    cwd: `${origin.root}/${REPO}`,
    stdin: new Uint8Array(),
  })).byteLength;
  await using e = await mirrorEdge(origin.url, { mirrorDir });
  origin.stats.reset();
  await warm(e, REPO);
  await e.edge.idle();
  const sent = origin.stats.bytesOut;
  assert(
    sent < pushed.packBytes + full / 4,
    `origin sent ${sent} bytes; the new objects are ${pushed.packBytes}, a full clone ${full}`,
  );
  assertEquals(await metric(e.url, "gitedge_mirror_layers_total"), 1, "the build's pack");
  await git(["clone", "-q", "--bare", origin.repoUrl(REPO), `${dir.path}/direct`]);
  const trace = await tracedGit([...URI_CLONE, "--bare", `${e.url}/${REPO}`, `${dir.path}/uri`]);
  assert(urisFetched(trace).length >= 1, "served by URIs");
  await git(["fsck", "--full"], { cwd: `${dir.path}/uri` });
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/uri`);
});

const modern = await modernGit();
if (typeof modern === "string") {
  skipped("mirror layers: git 2.55 everywhere", modern);
} else {
  Deno.test("mirror layers: git 2.55 as origin, mirror and client: the refresh layer from the mirror, a URI clone equal to a direct one", async () => {
    const bin = modern.bin;
    await using dir = await tempDir();
    await using origin = await startOrigin({ gitBin: bin });
    await using e = await mirrorEdge(origin.url, { mirrorGit: bin });
    await makeRepo(origin, REPO, { commits: 10 });
    await warm(e, REPO);
    await e.edge.idle();
    const pushed = await pushCommits(origin, REPO, dir.path);
    origin.stats.reset();
    await git(["clone", "-q", "--bare", `${e.url}/${REPO}`, `${dir.path}/plain`], { bin });
    await e.edge.idle();
    assertEquals(
      await metric(e.url, "gitedge_mirror_layers_total"),
      1,
      "the layer from the mirror",
    );
    assert(origin.stats.bytesOut < 1.5 * pushed.packBytes, `origin sent ${origin.stats.bytesOut}`);
    await git(["clone", "-q", "--bare", origin.repoUrl(REPO), `${dir.path}/direct`], { bin });
    const uri = ["-c", "fetch.uriProtocols=http", "clone", "-q", "--bare"];
    await git([...uri, `${e.url}/${REPO}`, `${dir.path}/uri`], { bin });
    await git(["fsck", "--full"], { cwd: `${dir.path}/uri`, bin });
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/uri`);
  });
}
