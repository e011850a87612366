/**
 * Bundle URIs from the snapshot (src/proxy/bundles/bundle_answer.ts, bundle_list.ts, bundle_routes.ts):
 * a warm edge advertises `bundle-uri` and answers it with one bundle per snapshot layer; stock git
 * 2.55 cloning with `transfer.bundleURI=true` takes its objects from them and ends equal to a
 * direct clone. Debian's git 2.39 does not fetch bundles in clone: these cases need the current
 * git and are skipped (saying so) without it.
 */
import { git, tempDir } from "../support/git.ts";
import { modernGit } from "../support/git_builds.ts";
import { skipped } from "../support/skips.ts";
import { startOrigin } from "../support/origin.ts";
import { denoEdgeFactory, type EdgeUnderTest } from "../support/edge.ts";
import { addCommits, assertSameClone, makeRepo, refsOf } from "../support/fixtures.ts";
import { assert, assertEquals } from "../support/assert.ts";
import { withinDeadline } from "../support/deadline.ts";
import { warm } from "./edge_suite.ts";
import { encodePkts } from "../../src/git/pktline.ts";

const modern = await modernGit();
if (typeof modern === "string") skipped("bundle URIs", modern);

/** A counter from `/_edge/metrics` (0 when absent). */
async function metric(edge: EdgeUnderTest, name: string): Promise<number> {
  const text = await (await fetch(`${edge.url}/_edge/metrics`)).text();
  const m = new RegExp(`^${name} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
}

/** POSTs a protocol v2 `bundle-uri` request to `repoUrl`, as git 2.55 writes it. */
async function postBundleUri(
  repoUrl: string,
  headers: Record<string, string> = {},
): Promise<Response> {
  return await fetch(`${repoUrl}/git-upload-pack`, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
      ...headers,
    },
    body: encodePkts([
      "agent=git/2.55.0",
      "object-format=sha1",
      "command=bundle-uri",
      "delim",
      "flush",
    ]) as Uint8Array<ArrayBuffer>,
  });
}

/** The edge's `bundle-uri` answer for `repoUrl` as `key=value` lines. */
async function bundleList(
  repoUrl: string,
  headers: Record<string, string> = {},
): Promise<Record<string, string>> {
  const res = await postBundleUri(repoUrl, headers);
  assertEquals(res.status, 200, "bundle-uri status");
  const bytes = new Uint8Array(await res.arrayBuffer());
  const out: Record<string, string> = {};
  let at = 0;
  while (at + 4 <= bytes.length) {
    const len = parseInt(new TextDecoder().decode(bytes.subarray(at, at + 4)), 16);
    if (len < 4) break;
    const line = new TextDecoder().decode(bytes.subarray(at + 4, at + len)).replace(/\n$/, "");
    const eq = line.indexOf("=");
    out[line.slice(0, eq)] = line.slice(eq + 1);
    at += len;
  }
  return out;
}

const gitBin = typeof modern === "string" ? "git" : modern.bin;

/** `git args` with the current git, in `cwd`, under a liveness deadline. */
function run(args: string[], cwd?: string): Promise<string> {
  return withinDeadline(git(args, { bin: gitBin, cwd }), `git ${args[0]}`);
}

/** An origin that lets only alice read (with the credentials `alice` sends). */
function aliceOrigin() {
  return startOrigin({ gitBin, requireAuth: { user: "alice", password: "s3cret" } });
}

/** Headers that authenticate alice to `aliceOrigin()`. */
const alice = { authorization: `Basic ${btoa("alice:s3cret")}` };

/** The URIs of the bundles in a `bundle-uri` answer, oldest layer (lowest creation token) first. */
function layerUris(list: Record<string, string>): string[] {
  const token = (key: string) => Number(list[key.replace(/uri$/, "creationtoken")]);
  return Object.keys(list).filter((k) => k.endsWith(".uri"))
    .sort((a, b) => token(a) - token(b))
    .map((k) => list[k]);
}

Deno.test({
  name: "a bundle-URI clone from a warm edge takes its objects from one bundle per layer",
  ignore: typeof modern === "string",
  async fn() {
    await using origin = await startOrigin({ gitBin });
    await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 3 });
    await using dir = await tempDir();
    // A first layer split into several packs (one bundle joins them), then a second layer.
    await makeRepo(origin, "r.git", {
      commits: 30,
      branches: 2,
      tags: 2,
      binaryBytes: 600_000,
      deltaFileRevisions: 40,
    });
    const first = await warm(edge, "r.git");
    assert((first.packs as unknown[]).length >= 2, "the first layer has several packs");
    await addCommits(origin, "r.git", { commits: 3, tag: "v-next" });
    await warm(edge, "r.git");
    const url = `${edge.url}/r.git`;

    const list = await bundleList(url);
    assertEquals(list["bundle.heuristic"], "creationToken", "heuristic");
    const tokens = Object.keys(list).filter((k) => k.endsWith(".creationtoken"));
    assertEquals(tokens.length, 2, `one bundle per layer: ${JSON.stringify(list)}`);

    // Each bundle is one that git itself accepts (the first needs nothing, the second the first).
    const uris = Object.keys(list).filter((k) => k.endsWith(".uri")).map((k) => list[k]);
    await git(["init", "-q", "--bare", `${dir.path}/check`], { bin: gitBin });
    for (const [i, uri] of uris.entries()) {
      const res = await fetch(uri);
      assertEquals(res.status, 200, `bundle ${i}`);
      await Deno.writeFile(`${dir.path}/b${i}.bundle`, new Uint8Array(await res.arrayBuffer()));
    }
    const order = Number(list[tokens[0]]) < Number(list[tokens[1]]) ? [0, 1] : [1, 0];
    for (const i of order) {
      await git(["bundle", "unbundle", `${dir.path}/b${i}.bundle`], {
        cwd: `${dir.path}/check`,
        bin: gitBin,
      });
    }

    await git(["clone", "-q", "--mirror", origin.repoUrl("r.git"), `${dir.path}/direct`], {
      bin: gitBin,
    });
    origin.stats.reset();
    await withinDeadline(
      git(["-c", "transfer.bundleURI=true", "clone", "-q", "--mirror", url, `${dir.path}/edge`], {
        bin: gitBin,
      }),
      "bundle-URI clone",
    );
    assertEquals(await metric(edge, "gitedge_bundles_served_total"), 2 + uris.length, "bundles");
    // The bundles' refs (refs/bundles/*) are the newest layer's tips; the rest equals a direct
    // clone once they are dropped (fsck --full runs on the clone as it is).
    const edgeRefs = await refsOf(`${dir.path}/edge`);
    const bundleRefs = Object.keys(edgeRefs).filter((r) => r.startsWith("refs/bundles/"));
    const { HEAD: _, ...tips } = await refsOf(`${origin.root}/r.git`);
    assertEquals(
      bundleRefs.sort(),
      Object.keys(tips).map((r) => r.replace(/^refs\//, "refs/bundles/")).sort(),
      "the clone applied the edge's bundles",
    );
    for (const r of bundleRefs) {
      assertEquals(edgeRefs[r], tips[r.replace(/^refs\/bundles\//, "refs/")], r);
      await git(["update-ref", "-d", r], { cwd: `${dir.path}/edge`, bin: gitBin });
    }
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
    // What the origin still sent after the bundles: the small fetch of what they lack (nothing).
    const originBytes = origin.stats.bytesOut;
    assert(originBytes < 20_000, `the origin sent ${originBytes} bytes, not the repository`);
  },
});

Deno.test({
  name: "a cold edge leaves bundle-uri to the origin (not advertised where the origin does not)",
  ignore: typeof modern === "string",
  async fn() {
    await using origin = await startOrigin({ gitBin });
    await using edge = await denoEdgeFactory({ origin: origin.url });
    await makeRepo(origin, "r.git", { commits: 5 });
    const res = await fetch(`${edge.url}/r.git/info/refs?service=git-upload-pack`, {
      headers: { "git-protocol": "version=2" },
    });
    const adv = await res.text();
    assert(!adv.includes("bundle-uri"), `cold: no bundle-uri advertised: ${adv}`);
    await warm(edge, "r.git");
    const warmAdv = await (await fetch(`${edge.url}/r.git/info/refs?service=git-upload-pack`, {
      headers: { "git-protocol": "version=2" },
    })).text();
    assert(warmAdv.includes("bundle-uri\n"), `warm: bundle-uri advertised: ${warmAdv}`);
  },
});

Deno.test({
  name: "only a client the origin lets read the repository gets the edge's bundle list",
  ignore: typeof modern === "string",
  async fn() {
    await using origin = await aliceOrigin();
    // No credential memo: every bundle-uri request asks the origin.
    await using edge = await denoEdgeFactory({ origin: origin.url, authTtlSeconds: 0 });
    await makeRepo(origin, "p.git", { commits: 5 });
    await warm(edge, "p.git", alice);
    const url = `${edge.url}/p.git`;
    const anonymous = await postBundleUri(url);
    const text = await anonymous.text();
    assertEquals(anonymous.status, 401, "the origin's refusal, relayed");
    assert(!text.includes("/_edge/bundles/"), `no bundle URLs to the unauthorised: ${text}`);
    const wrong = await postBundleUri(url, { authorization: `Basic ${btoa("alice:wrong")}` });
    assertEquals(wrong.status, 401, "a wrong password is refused");
    await wrong.body?.cancel();
    const list = await bundleList(url, alice);
    assert(
      Object.values(list).some((v) => v.includes("/_edge/bundles/")),
      `alice gets the list: ${JSON.stringify(list)}`,
    );
  },
});

Deno.test({
  name: "clone --bundle-uri=<the edge's list>, then a fetch downloads only the newer layer",
  ignore: typeof modern === "string",
  async fn() {
    await using origin = await startOrigin({ gitBin });
    await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 3 });
    await using dir = await tempDir();
    await makeRepo(origin, "r.git", { commits: 20, branches: 2, tags: 1, binaryBytes: 400_000 });
    await warm(edge, "r.git");
    const url = `${edge.url}/r.git`;
    const listUrl = `${edge.url}/_edge/bundle-list/r.git`;
    await run(["clone", "-q", `--bundle-uri=${listUrl}`, url, `${dir.path}/edge`]);
    assertEquals(await metric(edge, "gitedge_bundles_served_total"), 1, "the one layer's bundle");
    const config = (key: string) => run(["config", key], `${dir.path}/edge`).then((s) => s.trim());
    assertEquals(await config("fetch.bundleURI"), listUrl, "git records the list");
    const token = Number(await config("fetch.bundleCreationToken"));
    assert(token > 0, "and the newest bundle's token");

    // The origin moves; the edge refreshes (a second layer); the clone fetches.
    await addCommits(origin, "r.git", { commits: 4, tag: "v-next" });
    await warm(edge, "r.git");
    await run(["fetch", "-q", "--tags", "origin"], `${dir.path}/edge`);
    assertEquals(await metric(edge, "gitedge_bundles_served_total"), 2, "only the new layer");
    assert(Number(await config("fetch.bundleCreationToken")) > token, "the token moved on");
    // Nothing new: no bundle downloaded.
    await run(["fetch", "-q", "origin"], `${dir.path}/edge`);
    assertEquals(await metric(edge, "gitedge_bundles_served_total"), 2, "nothing newer");

    await run(["clone", "-q", "--mirror", origin.repoUrl("r.git"), `${dir.path}/direct`]);
    const direct = await refsOf(`${dir.path}/direct`);
    const got = await refsOf(`${dir.path}/edge`);
    for (const [name, id] of Object.entries(direct)) {
      if (name === "HEAD") continue;
      const mine = name.startsWith("refs/heads/")
        ? got[name.replace("refs/heads/", "refs/remotes/origin/")]
        : got[name];
      assertEquals(mine, id, `${name} as fetched`);
    }
    await run(["fsck", "--full", "--no-progress"], `${dir.path}/edge`);
  },
});

Deno.test({
  name: "the bundle list URL is the origin's to grant, and 404 while there are no bundles",
  ignore: typeof modern === "string",
  async fn() {
    await using origin = await aliceOrigin();
    await using edge = await denoEdgeFactory({ origin: origin.url, authTtlSeconds: 0 });
    await makeRepo(origin, "p.git", { commits: 5 });
    const listUrl = `${edge.url}/_edge/bundle-list/p.git`;
    const cold = await fetch(listUrl, { headers: alice });
    assertEquals(cold.status, 404, "cold: no list");
    await cold.body?.cancel();
    await warm(edge, "p.git", alice);
    const anonymous = await fetch(listUrl);
    const text = await anonymous.text();
    assertEquals(anonymous.status, 401, "the origin's refusal");
    assert(!text.includes("/_edge/bundles/"), "no bundle URLs to the unauthorised");
    const list = await fetch(listUrl, { headers: alice });
    assertEquals(list.status, 200, "alice's list");
    assert((await list.text()).includes("heuristic = creationToken"), "config format");
  },
});

Deno.test({
  name: "a client lacking a bundle's prerequisites skips it and still ends equal to the origin",
  ignore: typeof modern === "string",
  async fn() {
    await using origin = await startOrigin({ gitBin });
    await using edge = await denoEdgeFactory({ origin: origin.url });
    await using dir = await tempDir();
    await makeRepo(origin, "r.git", { commits: 10, branches: 1, tags: 1 });
    const url = `${edge.url}/r.git`;
    // The client cloned before the edge's first layer and never saw its tips (from the origin:
    // a plain clone through the edge would start that first build itself).
    await run(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/c`]);
    await run(["remote", "set-url", "origin", url], `${dir.path}/c`);
    await addCommits(origin, "r.git", { commits: 2 });
    await warm(edge, "r.git");
    const first = await bundleList(url);
    const firstToken = Object.entries(first).find(([k]) => k.endsWith(".creationtoken"))![1];
    await addCommits(origin, "r.git", { commits: 3, tag: "v-late" });
    await warm(edge, "r.git");
    // It follows the edge's list from the first layer's token on: the second layer's bundle
    // needs the first layer's tips, which it lacks.
    const cfg = (k: string, v: string) => run(["config", k, v], `${dir.path}/c`);
    await cfg("fetch.bundleURI", `${edge.url}/_edge/bundle-list/r.git`);
    await cfg("fetch.bundleCreationToken", firstToken);
    await run(["fetch", "-q", "--tags", "origin"], `${dir.path}/c`);
    assertEquals(await metric(edge, "gitedge_bundles_served_total"), 1, "the bundle was fetched");
    const got = await refsOf(`${dir.path}/c`);
    assertEquals(
      Object.keys(got).filter((r) => r.startsWith("refs/bundles/")),
      [],
      "and not applied",
    );
    const tips = await refsOf(`${origin.root}/r.git`);
    assertEquals(got["refs/remotes/origin/main"], tips["refs/heads/main"], "main as fetched");
    assertEquals(got["refs/tags/v-late"], tips["refs/tags/v-late"], "the new tag");
    await run(["fsck", "--full", "--no-progress"], `${dir.path}/c`);
  },
});

Deno.test({
  name: "a SHA-256 repository's bundles are version 3 bundles git accepts",
  ignore: typeof modern === "string",
  async fn() {
    await using origin = await startOrigin({ gitBin });
    await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 3 });
    await using dir = await tempDir();
    await makeRepo(origin, "s.git", { commits: 8, tags: 1, binaryBytes: 400_000 }, {
      objectFormat: "sha256",
    });
    const first = await warm(edge, "s.git");
    assert((first.packs as unknown[]).length >= 2, "a layer of several packs: one joined pack");
    await addCommits(origin, "s.git", { commits: 2 });
    await warm(edge, "s.git");
    const list = await bundleList(`${edge.url}/s.git`);
    const uris = layerUris(list);
    assertEquals(uris.length, 2, "two layers");
    await git(["init", "-q", "--bare", "--object-format=sha256", `${dir.path}/check`], {
      bin: gitBin,
    });
    for (const [i, uri] of uris.entries()) {
      const bytes = new Uint8Array(await (await fetch(uri)).arrayBuffer());
      assertEquals(new TextDecoder().decode(bytes.subarray(0, 16)), "# v3 git bundle\n", "v3");
      await Deno.writeFile(`${dir.path}/${i}.bundle`, bytes);
      await git(["bundle", "unbundle", `${dir.path}/${i}.bundle`], {
        cwd: `${dir.path}/check`,
        bin: gitBin,
      });
    }
    const tips = await refsOf(`${origin.root}/s.git`);
    const main = tips["refs/heads/main"];
    assertEquals(main.length, 64, "a SHA-256 id");
    await git(["cat-file", "-e", `${main}^{commit}`], { cwd: `${dir.path}/check`, bin: gitBin });
  },
});

Deno.test({
  name: "bundle URLs are signed; a one-pack layer's bundle serves byte ranges, a joined one whole",
  ignore: typeof modern === "string",
  async fn() {
    await using origin = await startOrigin({ gitBin });
    await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 3 });
    await makeRepo(origin, "r.git", { commits: 10, binaryBytes: 400_000 });
    await warm(edge, "r.git");
    await addCommits(origin, "r.git", { commits: 2 });
    await warm(edge, "r.git");
    const list = await bundleList(`${edge.url}/r.git`);
    const [joined, single] = layerUris(list);
    const whole = new Uint8Array(await (await fetch(single)).arrayBuffer());
    const cases: [string, number, number][] = [
      ["bytes=0-9", 0, 10],
      ["bytes=20-", 20, whole.length],
      ["bytes=-30", whole.length - 30, whole.length],
      [`bytes=5-${whole.length + 100}`, 5, whole.length],
    ];
    for (const [range, from, to] of cases) {
      const res = await fetch(single, { headers: { range } });
      assertEquals(res.status, 206, range);
      assertEquals(new Uint8Array(await res.arrayBuffer()), whole.subarray(from, to), range);
    }
    const past = await fetch(single, { headers: { range: `bytes=${whole.length}-` } });
    assertEquals(past.status, 416, "past the end");
    await past.body?.cancel();
    const all = await fetch(joined, { headers: { range: "bytes=0-9" } });
    assertEquals([all.status, all.headers.get("accept-ranges")], [200, "none"], "joined: whole");
    const bytes = new Uint8Array(await all.arrayBuffer());
    assertEquals(Number(all.headers.get("content-length")), bytes.length, "its length, announced");
    for (
      const bad of [
        single.replace(/sig=(.)/, (_, c) => `sig=${c === "A" ? "B" : "A"}`),
        single.replace(/exp=\d+/, "exp=1"),
      ]
    ) {
      const res = await fetch(bad);
      assertEquals(res.status, 403, bad);
      await res.body?.cancel();
    }
    const other = await fetch(single.replace(/\/[^/]*\.bundle/, "/nosuchlayer-0.bundle"));
    assertEquals(other.status, 403, "a name its signature was not made for");
    await other.body?.cancel();
  },
});
