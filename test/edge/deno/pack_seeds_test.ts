/**
 * Seeded first builds on the Deno server (src/proxy/snapshots/pack_seeds.ts): the first clone of a
 * repository the edge has never seen passes through, and the snapshot build takes that clone's
 * pack as it streamed by instead of asking the origin for it again.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { modernGit } from "../../support/git_builds.ts";
import { URI_CLONE } from "../../proxy/edge_suite.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { ForwardingStore } from "../../support/forwarding_store.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { PackSeeds } from "../../../src/proxy/snapshots/pack_seeds.ts";
import { encodePkts, PktLineReader } from "../../../src/git/pktline.ts";
import { readFetchResponse } from "../../../src/git/fetch_response.ts";
import { scanPack } from "../../../src/git/pack_reader.ts";

const REPO = "team/r.git";
const SPEC = { commits: 14, branches: 2, tags: 2, binaryBytes: 400_000, deltaFileRevisions: 8 };

async function gitBin(): Promise<string> {
  const modern = await modernGit();
  return typeof modern === "string" ? "git" : modern.bin;
}

async function metric(edgeUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(name))
    .reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
}

/**
 * `REPO` on an origin whose counts start once it is made, an edge in front that has never seen it
 * (snapshots of 2 packs), a scratch directory and the git to clone with; disposing it stops the
 * edge and the origin and removes the directory.
 */
async function coldEdge() {
  await using stack = new AsyncDisposableStack();
  const bin = await gitBin();
  const dir = stack.use(await tempDir());
  const origin = stack.use(await startOrigin());
  const edge = stack.use(await denoEdgeFactory({ origin: origin.url, chunks: 2 }));
  await makeRepo(origin, REPO, SPEC);
  origin.stats.reset();
  const owned = stack.move();
  return { bin, dir, origin, edge, [Symbol.asyncDispose]: () => owned.disposeAsync() };
}

for (const cache of [true, false]) {
  const label = cache ? "through the response cache" : "response cache off";
  Deno.test(`a cold edge's first clone seeds the snapshot: the origin sends the full pack once (${label})`, async () => {
    const bin = await gitBin();
    await using dir = await tempDir();
    await using origin = await startOrigin();
    await using edge = await denoEdgeFactory({
      origin: origin.url,
      chunks: 3,
      ...(cache ? {} : { responseCacheBytes: 0 }),
    });
    await makeRepo(origin, REPO, SPEC);
    await git(["clone", "-q", "--mirror", `${origin.url}/${REPO}`, `${dir.path}/direct`], { bin });
    origin.stats.reset();

    await git([...URI_CLONE, `${edge.url}/${REPO}`, `${dir.path}/first`], { bin });
    await withinDeadline(edge.settled(REPO, (s) => s.state === "ready"), "the build");
    assertEquals(edge.buildErrors ?? [], [], "no build failed");
    const status = await (await fetch(`${edge.url}/_edge/status/${REPO}`)).json();
    assertEquals(status.snapshot.state, "ready", "a snapshot after the first clone");
    assertEquals(status.snapshot.packs.length, 3, "split as a build splits");
    assertEquals(origin.stats.commands.fetch, 1, "the clone's fetch, and no second one");
    assertEquals(
      (await edge.listStored("repos/")).filter((k) => k.includes("/seeds/")),
      [],
      "the seed's segments are gone",
    );

    // The next clone gets the snapshot's packs by URI and is the same as a direct clone.
    const uris = await metric(edge.url, "gitedge_packfile_uris_total");
    await git([...URI_CLONE, "--mirror", `${edge.url}/${REPO}`, `${dir.path}/second`], { bin });
    assert(await metric(edge.url, "gitedge_packfile_uris_total") > uris, "URIs handed out");
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/second`);
    await git(["fsck", "--full", "--strict"], { cwd: `${dir.path}/second`, bin });
    await git(["fsck", "--full"], { cwd: `${dir.path}/first`, bin });
  });
}

Deno.test("a clone of one branch wants less than the snapshot's tips: its pack seeds no build, which fetches its own", async () => {
  await using cold = await coldEdge();
  const { bin, dir, origin, edge } = cold;
  await git([
    ...URI_CLONE,
    "--single-branch",
    "--no-tags",
    `${edge.url}/${REPO}`,
    `${dir.path}/one`,
  ], { bin });
  await withinDeadline(edge.settled(REPO, (s) => s.state === "ready"), "the build");
  assertEquals(origin.stats.commands.fetch, 2, "the clone's and the build's own");
  await git([...URI_CLONE, "--mirror", `${edge.url}/${REPO}`, `${dir.path}/full`], { bin });
  await git(["clone", "-q", "--mirror", `${origin.url}/${REPO}`, `${dir.path}/direct`], { bin });
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/full`);
});

Deno.test("a burst of clones of a never-seen repository: the origin computes at most 2 full packs", async () => {
  await using cold = await coldEdge();
  const { bin, dir, origin, edge } = cold;
  await Promise.all(
    Array.from(
      { length: 6 },
      (_, i) => git([...URI_CLONE, `${edge.url}/${REPO}`, `${dir.path}/c${i}`], { bin }),
    ),
  );
  await withinDeadline(edge.settled(REPO, (s) => s.state === "ready"), "the build");
  assert(
    origin.stats.commands.fetch <= 2,
    `origin fetches: ${JSON.stringify(origin.stats.commands)}`,
  );
  await git(["clone", "-q", `${origin.url}/${REPO}`, `${dir.path}/direct`], { bin });
  for (let i = 0; i < 6; i++) await assertSameClone(`${dir.path}/direct`, `${dir.path}/c${i}`);
});

/** A store whose writes crawl: a seed's copy falls behind the client. */
class SlowStore extends ForwardingStore {
  override put(key: string, body: ReadableStream<Uint8Array>): Promise<{ size: number }> {
    const slow = body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        async transform(chunk, controller) {
          await new Promise((r) => setTimeout(r, 50));
          controller.enqueue(chunk);
        },
      }),
    );
    return this.inner.put(key, slow);
  }
}

Deno.test("a seed whose store falls behind is dropped: the client gets the whole answer at its own pace, no build takes it, nothing stays stored", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  const { refs } = await makeRepo(origin, REPO, SPEC);
  const wants = [...new Set(Object.values(refs))];
  const request = encodePkts([
    "command=fetch\n",
    "object-format=sha1\n",
    "delim",
    "ofs-delta\n",
    "no-progress\n",
    ...wants.map((w) => `want ${w}\n`),
    "done\n",
    "flush",
  ]);
  const res = await fetch(`${origin.url}/${REPO}/git-upload-pack`, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
    },
    body: request as Uint8Array<ArrayBuffer>,
  });
  assertEquals(res.status, 200);
  const store = new FsPackStore(`${dir.path}/store`);
  const seeds = new PackSeeds(new SlowStore(store), { maxQueuedBytes: 64 * 1024 });
  const { body, staged } = seeds.tee("repo-id", wants, "sha1", false, res.body!);
  assert(staged, "a seed started");
  // The client reads everything, and gets a complete, valid pack.
  let pack;
  const reader = new PktLineReader(body);
  for await (const part of readFetchResponse(reader)) {
    if (part.section === "packfile") pack = await scanPack(part.pack);
  }
  // Release the origin's response: the answer ends at its flush, before the body reports done.
  await reader.cancel();
  assert(pack && pack.objects > 0, "the client's pack is whole");
  assertEquals(
    await withinDeadline(seeds.take("repo-id", wants, "sha1"), "take"),
    null,
    "dropped",
  );
  assertEquals(await store.list("repos/"), [], "nothing left in the store");
});
