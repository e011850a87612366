/**
 * Plain clones streamed from the snapshot (src/proxy/fetch/streamed_fetch.ts, plan `stream-snapshot`):
 * when they are not (the origin moved, a single branch, a snapshot of several layers, the
 * setting off) the clone takes today's path and still equals a direct one; a caller the origin
 * does not accept never gets snapshot bytes; and the side-band framing of the streamed pack. The
 * streamed clone itself, by git 2.39 and 2.55 on the Deno server and the Worker, is in
 * edge_suite.ts ("a warm plain clone gets one pack streamed from the snapshot").
 */
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { denoEdgeFactory, type EdgeUnderTest } from "../../support/edge.ts";
import { addCommits, assertSameClone, makeRepo, refsOf } from "../../support/fixtures.ts";
import { assertSameObjects } from "../../support/repo_compare.ts";
import { assert, assertEquals } from "../../support/assert.ts";
import { warm } from "../edge_suite.ts";
import { decodePkts, encodePkts, MAX_PKT_LENGTH } from "../../../src/git/pktline.ts";
import { sidebandPack } from "../../../src/proxy/fetch/streamed_fetch.ts";
import { makeAwkwardRepo } from "../../support/awkward.ts";
import { withinDeadline } from "../../support/deadline.ts";

const PLAIN = ["-c", "protocol.version=2", "clone", "-q"];

/** A counter from `/_edge/metrics` (0 when absent). */
async function metric(edge: EdgeUnderTest, name: string): Promise<number> {
  const text = await (await fetch(`${edge.url}/_edge/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

/** A plain clone's fetch of `wants`, as stock git writes it (no packfile-uris). */
function plainFetch(wants: string[]): Uint8Array {
  return encodePkts([
    "command=fetch\n",
    "object-format=sha1\n",
    "delim",
    "thin-pack\n",
    "no-progress\n",
    "include-tag\n",
    "ofs-delta\n",
    ...wants.map((w) => `want ${w}\n`),
    "done\n",
    "flush",
  ]);
}

const FIXTURE = { commits: 12, branches: 2, tags: 2, binaryBytes: 100_000 };

Deno.test("plain clones the snapshot does not match exactly take today's path, equal to direct", async () => {
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
  await using dir = await tempDir();
  await makeRepo(origin, "r.git", FIXTURE);
  await warm(edge, "r.git");
  const url = `${edge.url}/r.git`;
  const d = dir.path;

  // The snapshot matches: streamed, the origin runs no fetch.
  origin.stats.reset();
  await git([...PLAIN, url, `${d}/streamed`]);
  assertEquals(origin.stats.commands.fetch, undefined, "streamed");
  assertEquals(await metric(edge, "gitedge_fetch_streamed_total"), 1);

  // A single branch wants a tip less than the snapshot has.
  await git(["clone", "-q", "--single-branch", origin.repoUrl("r.git"), `${d}/direct-single`]);
  origin.stats.reset();
  await git([...PLAIN, "--single-branch", url, `${d}/single`]);
  assertEquals(origin.stats.commands.fetch, 1, "single branch: the origin's pack");
  await assertSameClone(`${d}/direct-single`, `${d}/single`);

  // The origin moved since the build: the wants differ from the tips. The clone gets the
  // origin's pack and starts a refresh (its own fetch, of what is new, runs behind the clone).
  await addCommits(origin, "r.git", { commits: 2 });
  await git(["clone", "-q", origin.repoUrl("r.git"), `${d}/direct-moved`]);
  const builtBefore = await builtAt(edge);
  origin.stats.reset();
  await git([...PLAIN, url, `${d}/moved`]);
  assert((origin.stats.commands.fetch ?? 0) >= 1, "moved: the origin's pack");
  await assertSameClone(`${d}/direct-moved`, `${d}/moved`);
  await assertSameObjects(`${d}/direct-moved`, `${d}/moved`);
  assertEquals(await metric(edge, "gitedge_fetch_streamed_total"), 1, "nothing more streamed");
  // Once refreshed, a plain clone of the new tips is the snapshot's again.
  await withinDeadline(
    (async () => {
      while (await builtAt(edge) === builtBefore) await new Promise((r) => setTimeout(r, 100));
    })(),
    "the refresh a plain clone started",
  );
});

/** When the snapshot of r.git in force was built. */
async function builtAt(edge: EdgeUnderTest): Promise<unknown> {
  const res = await fetch(`${edge.url}/_edge/status/r.git`);
  return (await res.json()).snapshot?.builtAt;
}

Deno.test("a snapshot of several layers is not streamed: git --strict refuses an object twice", async () => {
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 2 });
  await using dir = await tempDir();
  const d = dir.path;
  await makeRepo(origin, "r.git", FIXTURE);
  await warm(edge, "r.git");
  // A commit back to an older tree brings back a tree (and blobs) the first layer holds but the old tip's tree does
  // not: the refresh layer holds them again.
  await git(["clone", "-q", `${origin.root}/r.git`, `${d}/work`]);
  await git(["read-tree", "-u", "--reset", "HEAD~3"], { cwd: `${d}/work` });
  await git(["commit", "-q", "-m", "back to an older tree"], { cwd: `${d}/work` });
  await git(["push", "-q", "origin", "HEAD"], { cwd: `${d}/work` });
  const snap = await warm(edge, "r.git");
  assert((snap.packs as unknown[]).length >= 2, "a refresh layer");
  await git(["clone", "-q", origin.repoUrl("r.git"), `${d}/direct`]);
  origin.stats.reset();
  // transfer.fsckObjects: index-pack --strict, which dies on "appears twice in the pack".
  await git(["-c", "transfer.fsckObjects=true", ...PLAIN, `${edge.url}/r.git`, `${d}/strict`]);
  assertEquals(origin.stats.commands.fetch, 1, "the origin's pack");
  assertEquals(await metric(edge, "gitedge_fetch_streamed_total"), 0, "not streamed");
  await assertSameClone(`${d}/direct`, `${d}/strict`);
});

Deno.test("with snapshotPlainClones off, a plain clone of a warm edge gets the origin's pack", async () => {
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url, snapshotPlainClones: false });
  await using dir = await tempDir();
  await makeRepo(origin, "r.git", FIXTURE);
  await warm(edge, "r.git");
  await git(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/direct`]);
  origin.stats.reset();
  await git([...PLAIN, `${edge.url}/r.git`, `${dir.path}/edge`]);
  assertEquals(origin.stats.commands.fetch, 1, "the origin's pack");
  assertEquals(await metric(edge, "gitedge_fetch_streamed_total"), 0, "not streamed");
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
});

Deno.test("a private repository's snapshot is streamed only to a caller the origin accepted", async () => {
  await using origin = await startOrigin({ requireAuth: { user: "alice", password: "s3cret" } });
  await using edge = await denoEdgeFactory({ origin: origin.url });
  await using dir = await tempDir();
  await makeRepo(origin, "p.git", FIXTURE);
  const alice = { authorization: `Basic ${btoa("alice:s3cret")}` };
  await warm(edge, "p.git", alice);
  const { HEAD: _, ...tips } = await refsOf(`${origin.root}/p.git`);
  const wants = [...new Set(Object.values(tips))];
  const post = (headers: Record<string, string>) =>
    fetch(`${edge.url}/p.git/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
        ...headers,
      },
      body: plainFetch(wants) as Uint8Array<ArrayBuffer>,
    });
  // Alice's clone renews her memo (its ls-refs) and is streamed.
  const authed = new URL(`${edge.url}/p.git`);
  authed.username = "alice";
  authed.password = "s3cret";
  await git([
    "clone",
    "-q",
    "--mirror",
    origin.repoUrl("p.git").replace("://", "://alice:s3cret@"),
    `${dir.path}/direct`,
  ]);
  await git([...PLAIN, "--mirror", authed.href, `${dir.path}/alice`]);
  assertEquals(await metric(edge, "gitedge_fetch_streamed_total"), 1, "alice's clone streamed");
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/alice`);
  // No credential, or a wrong one, while alice's memo is fresh: the origin's refusal, no pack.
  const refused: Record<string, string>[] = [{}, { authorization: `Basic ${btoa("alice:wrong")}` }];
  for (const headers of refused) {
    const res = await post(headers);
    const body = new Uint8Array(await res.arrayBuffer());
    assertEquals(res.status, 401, `refused: ${JSON.stringify(headers)}`);
    assert(!new TextDecoder("latin1").decode(body).includes("PACK"), "no pack bytes");
  }
  assertEquals(await metric(edge, "gitedge_fetch_streamed_total"), 1, "nothing more streamed");
  // Alice's hand-made fetch, by the same rule, is streamed.
  const res = await post(alice);
  assertEquals(res.status, 200);
  assert(new TextDecoder("latin1").decode(await res.arrayBuffer()).includes("PACK"), "a pack");
  assertEquals(await metric(edge, "gitedge_fetch_streamed_total"), 2);
});

Deno.test("SHA-256 and awkward repositories (tags of blobs and trees, odd ref names) stream too", async () => {
  await using origin = await startOrigin();
  await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 3 });
  await using dir = await tempDir();
  const d = dir.path;
  await makeRepo(origin, "s.git", FIXTURE, { objectFormat: "sha256" });
  await makeAwkwardRepo(origin, "a.git", `${d}/scratch`);
  let streamed = 0;
  for (const repo of ["s.git", "a.git"]) {
    const snap = await warm(edge, repo);
    assert((snap.packs as unknown[]).length >= 2, `${repo}: several packs, joined`);
    await git(["clone", "-q", "--mirror", origin.repoUrl(repo), `${d}/direct-${repo}`]);
    origin.stats.reset();
    await git([...PLAIN, "--mirror", `${edge.url}/${repo}`, `${d}/edge-${repo}`]);
    assertEquals(origin.stats.commands.fetch, undefined, `${repo}: no fetch at the origin`);
    assertEquals(await metric(edge, "gitedge_fetch_streamed_total"), ++streamed, repo);
    await assertSameClone(`${d}/direct-${repo}`, `${d}/edge-${repo}`);
    await assertSameObjects(`${d}/direct-${repo}`, `${d}/edge-${repo}`);
  }
});

Deno.test("the streamed pack: side-band packets of at most 65520 bytes, band 3 if it fails", async () => {
  const big = new Uint8Array(200_000).map((_, i) => i % 251);
  const read = async (pack: ReadableStream<Uint8Array>) => {
    let sent = 0;
    const errors: unknown[] = [];
    const out = sidebandPack(
      encodePkts(["packfile\n"]),
      pack,
      (n) => sent += n,
      (e) => errors.push(e),
    );
    return {
      bytes: new Uint8Array(await new Response(out).arrayBuffer()),
      sent: () => sent,
      errors,
    };
  };
  const ok = await read(new Blob([big]).stream());
  const pkts = decodePkts(ok.bytes);
  assertEquals(pkts.at(-1)?.type, "flush", "ends in a flush");
  const data = pkts.slice(1, -1).map((p) => p.type === "data" ? p.data : new Uint8Array());
  assert(data.every((p) => p.length + 4 <= MAX_PKT_LENGTH && p[0] === 1), "band 1, within size");
  assertEquals(data.reduce((n, p) => n + p.length - 1, 0), big.length, "every byte");
  assertEquals(ok.sent(), big.length);

  // Small chunks (local R2 gives 4 KiB) are gathered into full packets.
  const small = new ReadableStream<Uint8Array>({
    start(c) {
      for (let at = 0; at < big.length; at += 4096) c.enqueue(big.subarray(at, at + 4096));
      c.close();
    },
  });
  const gathered = decodePkts((await read(small)).bytes).slice(1, -1);
  assertEquals(
    gathered.map((p) => p.type === "data" ? p.data.length - 1 : -1),
    [65515, 65515, 65515, big.length - 3 * 65515],
    "full packets",
  );

  const failing = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(big.subarray(0, 10));
    },
    pull(c) {
      c.error(new Error("store went away"));
    },
  });
  const bad = await read(failing);
  const last = decodePkts(bad.bytes).at(-1);
  assert(last?.type === "data" && last.data[0] === 3, "ends on band 3, no flush");
  assertEquals(bad.errors.length, 1);
});
