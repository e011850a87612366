/**
 * End-to-end cases for an edge in front of a real `git http-backend` origin, driven by stock git.
 * Registered once per runtime: `edgeSuite(denoEdgeFactory)` and `edgeSuite(workerEdgeFactory)`.
 */
import { git, GitCommandError, type GitOptions, tempDir } from "../support/git.ts";
import type { GitBuild } from "../support/git_builds.ts";
import { encodePkts } from "../../src/git/pktline.ts";
import { type Origin, type OriginOptions, startOrigin } from "../support/origin.ts";
import {
  addCommits,
  assertSameClone,
  assertSameObjects,
  makeRepo,
  refsOf,
} from "../support/fixtures.ts";
import type { EdgeFactory, EdgeUnderTest, EdgeUnderTestOptions } from "../support/edge.ts";
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { rawGet } from "../support/raw_http.ts";
import { tracedGit, URI_CLONE, urisFetched } from "../support/traced_git.ts";

// Shared with the benches; re-exported for the tests that take them from here.
export { tracedGit, URI_CLONE, urisFetched };

/** POSTs a protocol v2 request `body` to `${repoUrl}/git-upload-pack`, as git does. */
async function postUploadPack(repoUrl: string, body: Uint8Array): Promise<Response> {
  return await fetch(`${repoUrl}/git-upload-pack`, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
    },
    body: body as Uint8Array<ArrayBuffer>,
  });
}

/** Bytes as Latin-1 text (one char per byte), to search binary objects for ASCII strings. */
function latin1(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    out += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return out;
}

/** `gitedge_fetch_passthrough_total` by reason, from `/_edge/metrics`. */
async function passthroughCounts(edge: EdgeUnderTest): Promise<Record<string, number>> {
  const text = await (await fetch(`${edge.url}/_edge/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^gitedge_fetch_passthrough_total\{reason="([^"]*)"\} (\d+)$/gm)) {
    counts[m[1]] = Number(m[2]);
  }
  return counts;
}

/** The status of a GET of `url` (the body is discarded). */
async function statusOf(url: string, init?: RequestInit): Promise<number> {
  const res = await fetch(url, init);
  await res.body?.cancel();
  return res.status;
}

async function rawStatusOf(base: string, target: string): Promise<number> {
  return (await rawGet(base, target)).status;
}

async function status(
  edge: EdgeUnderTest,
  repo: string,
  headers: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const res = await fetch(`${edge.url}/_edge/status/${repo}`, { headers });
  assertEquals(res.status, 200, "status route");
  return (await res.json()).snapshot;
}

export async function warm(
  edge: Pick<EdgeUnderTest, "url">,
  repo: string,
  headers: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  const res = await fetch(`${edge.url}/_edge/warm/${repo}`, { method: "POST", headers });
  const body = await res.json();
  assertEquals(res.status, 200, `warm: ${JSON.stringify(body)}`);
  return body.snapshot;
}

interface World {
  origin: Origin;
  edge: EdgeUnderTest;
  dir: string;
  /** The client git (see {@link SuiteGits}). */
  git: (args: string[], opts?: GitOptions) => Promise<string>;
  tracedGit: (
    args: string[],
    opts?: { cwd?: string; env?: Record<string, string> },
  ) => Promise<string>;
}

/** Which git serves as the origin (`http-backend`) and which clones, for one run of the suite. */
export interface SuiteGits {
  origin: GitBuild;
  client: GitBuild;
}

/** Test-name tag for a pair of gits: `git 2.39`, or `origin git 2.55, client git 2.39`. */
export function gitsLabel(g: SuiteGits): string {
  return g.origin.bin === g.client.bin
    ? g.origin.label
    : `origin ${g.origin.label}, client ${g.client.label}`;
}

/** A clone-style protocol-v2 fetch of `want` that accepts http packfile URIs. */
function uriFetch(want: string): Uint8Array {
  return encodePkts([
    "command=fetch\n",
    "delim",
    "thin-pack\n",
    `want ${want}\n`,
    "packfile-uris http\n",
    "done\n",
    "flush",
  ]);
}

export function edgeSuite(
  factory: EdgeFactory,
  runtime: string,
  gits: SuiteGits,
  testOptions: Pick<Deno.TestDefinition, "sanitizeOps" | "sanitizeResources"> = {},
): void {
  const client = gits.client.bin;
  // Current git origins advertise bundle URIs, as hosted ones (Gitaly) do.
  const bundleUris = gits.origin.version[0] > 2 ||
    (gits.origin.version[0] === 2 && gits.origin.version[1] >= 40);
  const t = (
    name: string,
    fn: (w: World) => Promise<void>,
    opts: {
      originOptions?: OriginOptions;
      edge?: (origin: Origin) => Partial<EdgeUnderTestOptions>;
      /** Background builds are expected to fail (otherwise any failure fails the case). */
      buildsMayFail?: boolean;
    } = {},
  ) =>
    Deno.test({
      name: `[${runtime}, ${gitsLabel(gits)}] ${name}`,
      ...testOptions,
      fn: async () => {
        await using origin = await startOrigin({
          gitBin: gits.origin.bin,
          bundleUris,
          ...opts.originOptions,
        });
        await using edge = await factory({ origin: origin.url, chunks: 3, ...opts.edge?.(origin) });
        await using dir = await tempDir();
        await fn({
          origin,
          edge,
          dir: dir.path,
          git: (args, o = {}) => git(args, { ...o, bin: client }),
          tracedGit: (args, o = {}) => tracedGit(args, { ...o, bin: client }),
        });
        await edge.stop(); // waits for builds in flight
        if (edge.buildErrors && !opts.buildsMayFail) {
          assertEquals(edge.buildErrors, [], "background snapshot builds failed");
        }
      },
    });

  t("stock clone through the edge equals a direct clone (protocol v2 and v0)", async (w) => {
    await makeRepo(w.origin, "a/r.git", { commits: 20, branches: 2, tags: 2, merges: true });
    await w.git(["clone", "-q", w.origin.repoUrl("a/r.git"), `${w.dir}/direct`]);
    await w.git([
      "-c",
      "protocol.version=2",
      "clone",
      "-q",
      `${w.edge.url}/a/r.git`,
      `${w.dir}/v2`,
    ]);
    await w.git([
      "-c",
      "protocol.version=0",
      "clone",
      "-q",
      `${w.edge.url}/a/r.git`,
      `${w.dir}/v0`,
    ]);
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/v2`);
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/v0`);
    // No snapshot was advertised to clients that did not ask for URIs.
    const m = await (await fetch(`${w.edge.url}/_edge/metrics`)).text();
    assert(/gitedge_packfile_uris_total 0/.test(m), "no URIs handed out");
  });

  t(
    "after warm, a URI clone gets every snapshot pack by URI and little from the origin",
    async (w) => {
      await makeRepo(w.origin, "r.git", {
        commits: 30,
        branches: 2,
        tags: 2,
        binaryBytes: 600_000,
        deltaFileRevisions: 40,
      });
      const snap = await warm(w.edge, "r.git");
      assertEquals(snap.state, "ready", "snapshot state");
      const packs = snap.packs as { hash: string; bytes: number }[];
      assert(packs.length >= 2, `split into several packs (${packs.length})`);
      const st = await status(w.edge, "r.git");
      assertEquals(st.state, "ready", "status after warm");

      await w.git(["clone", "-q", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
      w.origin.stats.reset();
      const trace = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/edge`]);
      const fetched = urisFetched(trace);
      assertEquals(
        fetched.map((f) => f.hash).sort(),
        packs.map((p) => p.hash).sort(),
        "packs by URI",
      );
      assert(fetched.every((f) => f.uri.includes("/_edge/packs/")), "URIs point at the edge");
      const total = packs.reduce((n, p) => n + p.bytes, 0);
      assert(
        w.origin.stats.bytesOut < total / 10,
        `origin served ${w.origin.stats.bytesOut} bytes, snapshot is ${total}`,
      );
      await assertSameClone(`${w.dir}/direct`, `${w.dir}/edge`);
    },
  );

  t(
    "a warm URI clone costs the origin no pack work: the edge answers the fetch itself",
    async (w) => {
      await makeRepo(w.origin, "r.git", {
        commits: 20,
        branches: 2,
        tags: 2,
        binaryBytes: 300_000,
      });
      const snap = await warm(w.edge, "r.git");
      const packs = snap.packs as { hash: string }[];
      await w.git(["clone", "-q", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
      w.origin.stats.reset();
      const trace = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/edge`]);
      assertEquals(
        urisFetched(trace).map((f) => f.hash).sort(),
        packs.map((p) => p.hash).sort(),
        "every pack by URI",
      );
      await assertSameClone(`${w.dir}/direct`, `${w.dir}/edge`);
      // The ref advertisement (info/refs, ls-refs) and the edge's probe fetch (the origin's word
      // that this caller may fetch: no pack, docs/access.md) are all the origin saw.
      const byPath = w.origin.stats.byPath;
      assertEquals(byPath["POST /r.git/git-upload-pack"]?.requests, 2, JSON.stringify(byPath));
      assertEquals(byPath["GET /r.git/info/refs"]?.requests, 1, JSON.stringify(byPath));
      assertEquals(w.origin.stats.requests, 3, JSON.stringify(byPath));
      assertEquals(
        w.origin.stats.commands,
        { "ls-refs": 1, "fetch-probe": 1 },
        "no fetch for a pack reached the origin",
      );
      // sideband-all: the edge's own answer is banded throughout, and git still takes it.
      await w.git(["config", "uploadpack.allowSidebandAll", "true"], {
        cwd: `${w.origin.root}/r.git`,
      });
      const banded = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/banded`], {
        env: { GIT_TRACE_PACKET: "1", GIT_TEST_SIDEBAND_ALL: "1" },
      });
      assert(/> sideband-all$/m.test(banded), "fetch-pack requested sideband-all");
      assert(/< \\1packfile-uris$/m.test(banded), "a band-1 packfile-uris header");
      await assertSameClone(`${w.dir}/direct`, `${w.dir}/banded`);
      // Its ls-refs only: the probe's answer is remembered for --auth-ttl.
      assertEquals(w.origin.stats.byPath["POST /r.git/git-upload-pack"]?.requests, 3, "ls-refs");
      const text = await (await fetch(`${w.edge.url}/_edge/metrics`)).text();
      assert(/^gitedge_fetch_answered_total 2$/m.test(text), text);
    },
  );

  t(
    "a warm plain clone gets one pack streamed from the snapshot: the origin sends no pack",
    async (w) => {
      await makeRepo(w.origin, "r.git", {
        commits: 20,
        branches: 2,
        tags: 2,
        binaryBytes: 300_000,
        deltaFileRevisions: 20,
      });
      const snap = await warm(w.edge, "r.git");
      const packs = snap.packs as { bytes: number }[];
      assert(packs.length >= 2, `a layer of several packs, joined: ${packs.length}`);
      await w.git(["clone", "-q", "--mirror", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
      w.origin.stats.reset();
      // Without -q (and with --progress, stderr being a pipe) git asks for progress.
      const trace = await w.tracedGit([
        "-c",
        "protocol.version=2",
        "clone",
        "--progress",
        "--mirror",
        `${w.edge.url}/r.git`,
        `${w.dir}/edge`,
      ], { env: { GIT_TRACE_PACKET: "1" } });
      assertEquals(w.origin.stats.commands.fetch, undefined, "no fetch reached the origin");
      const total = packs.reduce((n, p) => n + p.bytes, 0);
      assert(
        w.origin.stats.bytesOut < 20_000,
        `the origin sent ${w.origin.stats.bytesOut} bytes (the snapshot is ${total})`,
      );
      assert(!/> packfile-uris/.test(trace), "a plain clone: no packfile-uris asked");
      assertMatch(trace, /remote: gitedge: \d+ objects/, "the edge's progress line");
      await assertSameClone(`${w.dir}/direct`, `${w.dir}/edge`);
      await assertSameObjects(`${w.dir}/direct`, `${w.dir}/edge`);
      // One pack in the clone, holding every object of the snapshot's packs.
      const clonePacks = [...Deno.readDirSync(`${w.dir}/edge/objects/pack`)]
        .filter((e) => e.name.endsWith(".pack"));
      assertEquals(clonePacks.length, 1, "one pack");
      // -q sends no-progress: no progress line then.
      const quiet = await w.tracedGit([
        "-c",
        "protocol.version=2",
        "clone",
        "-q",
        `${w.edge.url}/r.git`,
        `${w.dir}/quiet`,
      ]);
      assert(!/gitedge: \d+ objects/.test(quiet), `no progress with no-progress: ${quiet}`);
      await w.git(["fsck", "--full"], { cwd: `${w.dir}/quiet` });
      assertEquals(w.origin.stats.commands.fetch, undefined, "still no fetch at the origin");
      const text = await (await fetch(`${w.edge.url}/_edge/metrics`)).text();
      assertMatch(text, /^gitedge_fetch_streamed_total 2$/m, "two clones streamed");
    },
  );

  t("with the auth TTL at 0 every fetch goes to the origin", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 8, binaryBytes: 300_000 });
    await warm(w.edge, "r.git");
    w.origin.stats.reset();
    await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/edge`]);
    assertEquals(
      w.origin.stats.byPath["POST /r.git/git-upload-pack"]?.requests,
      2,
      "ls-refs, fetch",
    );
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/edge` });
  }, { edge: () => ({ authTtlSeconds: 0 }) });

  t(
    "CI bursts of shallow and partial clones: the origin computes each distinct pack once",
    async (w) => {
      await makeRepo(w.origin, "r.git", {
        commits: 25,
        branches: 2,
        tags: 2,
        binaryBytes: 200_000,
      });
      const url = `${w.edge.url}/r.git`;
      const direct = async (name: string, args: string[]) =>
        await w.git(["clone", "-q", ...args, w.origin.repoUrl("r.git"), `${w.dir}/${name}`]);
      const burst = async (name: string, args: string[], n: number) =>
        await Promise.all(
          Array.from({ length: n }, (_, i) =>
            w.git([...URI_CLONE, ...args, url, `${w.dir}/${name}${i}`])),
        );
      const same = async (a: string, b: string) => {
        await assertSameClone(`${w.dir}/${a}`, `${w.dir}/${b}`);
        const shallow = async (d: string) =>
          await Deno.readTextFile(`${w.dir}/${d}/.git/shallow`).catch(() => "");
        assertEquals(await shallow(b), await shallow(a), `${b}: same shallow boundary`);
        const objects = async (d: string) =>
          (await w.git(["rev-list", "--objects", "--all", "--missing=print"], {
            cwd: `${w.dir}/${d}`,
          }))
            .split("\n").sort().join("\n");
        assertEquals(await objects(b), await objects(a), `${b}: same objects`);
      };
      const metric = async (name: string, labels = "") => {
        const text = await (await fetch(`${w.edge.url}/_edge/metrics`)).text();
        const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `));
        return Number(line?.split(" ")[1] ?? 0);
      };
      await direct("d1", ["--depth", "1"]);
      await direct("dp", ["--filter=blob:none"]);
      w.origin.stats.reset();
      await burst("s", ["--depth", "1"], 4);
      await burst("p", ["--filter=blob:none"], 3);
      for (let i = 0; i < 4; i++) await same("d1", `s${i}`);
      for (let i = 0; i < 3; i++) await same("dp", `p${i}`);
      // Three distinct packs: depth 1, blob:none, and the blobs of the checkout that each partial
      // clone then fetches lazily (no `have` either: cached too).
      assertEquals(
        w.origin.stats.commands.fetch,
        3,
        `${JSON.stringify(w.origin.stats.commands)}\n${
          (await (await fetch(`${w.edge.url}/_edge/metrics`)).text()).split("\n").filter((l) =>
            l.includes("cache") || l.includes("passthrough")
          ).join("\n")
        }`,
      );
      assertEquals(await metric("gitedge_response_cache_total", '{result="miss"}'), 3, "misses");
      assertEquals(await metric("gitedge_response_cache_total", '{result="hit"}'), 7, "hits");
      assert(await metric("gitedge_response_cache_bytes_total") > 0, "bytes served from cache");

      // A new annotated tag on the same commit: include-tag answers must carry it, so no hit.
      const bare = `${w.origin.root}/r.git`;
      await w.git(["tag", "-a", "-m", "late tag", "late", "main"], { cwd: bare });
      await direct("d2", ["--depth", "1"]);
      w.origin.stats.reset();
      await burst("t", ["--depth", "1"], 2);
      await same("d2", "t0");
      await same("d2", "t1");
      assert((await refsOf(`${w.dir}/t0`))["refs/tags/late"], "the new tag came along");
      assertEquals(w.origin.stats.commands.fetch, 1, "one fetch for the new tag state");

      // The branch moves: clients want the new tip, a new key; never the old answer.
      await addCommits(w.origin, "r.git", { commits: 2 });
      await direct("d3", ["--depth", "1"]);
      await burst("m", ["--depth", "1"], 2);
      await same("d3", "m0");
      await same("d3", "m1");
      // Nothing else but answers in the cache's part of the store.
      const stored = await w.edge.listStored("cache/");
      assertEquals(stored.length, 5, stored.join(", "));
    },
  );

  t("without a credential memo, a cached answer is still served after a probe fetch", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 6, tags: 1 });
    // As actions/checkout fetches: one commit by id, depth 1, --no-tags (no include-tag).
    const tip = (await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"];
    // Three at once, then three more: concurrent misses wait for the first fill.
    const fetchOne = async (n: number) => {
      const cwd = `${w.dir}/s${n}`;
      await git(["init", "-q", cwd]);
      await git([
        ...URI_CLONE.slice(0, 4),
        "fetch",
        "-q",
        "--no-tags",
        "--depth=1",
        `${w.edge.url}/r.git`,
        `+${tip}:refs/remotes/origin/main`,
      ], { cwd });
      await git(["fsck", "--full"], { cwd });
    };
    // The same fetch straight from the origin: how many listings git itself makes (perhaps none).
    await git(["init", "-q", `${w.dir}/direct`]);
    await git([
      "fetch",
      "-q",
      "--no-tags",
      "--depth=1",
      w.origin.repoUrl("r.git"),
      `+${tip}:refs/remotes/origin/main`,
    ], { cwd: `${w.dir}/direct` });
    const own = w.origin.stats.commands["ls-refs"] ?? 0;
    w.origin.stats.reset();
    await Promise.all([0, 1, 2].map(fetchOne));
    await Promise.all([3, 4, 5].map(fetchOne));
    // The first fetch computed the pack; each of the six was vouched for first by a probe fetch
    // of its own, which costs the origin no pack (absent counts are 0: a bypass of the check
    // must show here), and no listing beyond the clones' own.
    const commands = JSON.stringify(w.origin.stats.commands);
    assertEquals(w.origin.stats.commands.fetch ?? 0, 1, `one fetch: ${commands}`);
    assertEquals(w.origin.stats.commands["fetch-probe"] ?? 0, 6, `a probe each: ${commands}`);
    assert((w.origin.stats.commands["ls-refs"] ?? 0) <= 6 * own, `no other listing: ${commands}`);
  }, { edge: () => ({ authTtlSeconds: 0 }) });

  t("the response cache off: every shallow clone goes to the origin", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 6 });
    for (const n of [0, 1]) {
      await w.git([...URI_CLONE, "--depth", "1", `${w.edge.url}/r.git`, `${w.dir}/s${n}`]);
    }
    assertEquals(w.origin.stats.commands.fetch, 2, "two fetches");
    assertEquals((await w.edge.listStored("cache/")).length, 0, "nothing stored");
  }, { edge: () => ({ responseCacheBytes: 0 }) });

  t("the origin moves on: clones stay correct and a refresh adds a small layer", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 20, binaryBytes: 400_000 });
    const first = await warm(w.edge, "r.git");
    await addCommits(w.origin, "r.git", { commits: 3, tag: "v9" });
    // The snapshot is stale: the origin sends the difference inline, and the clone's unknown
    // wants start a background refresh that fetches only the new objects.
    await w.git(["clone", "-q", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
    w.origin.stats.reset();
    await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/stale`]);
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/stale`);
    await w.edge.settled("r.git", (st) => st.builds === 2);
    const second = await status(w.edge, "r.git");
    assertEquals(second.builds, 2, "the stale clone started a refresh");
    assertEquals(second.state, "ready", "refreshed");
    assertEquals((await warm(w.edge, "r.git")).packs, second.packs, "warm: nothing more to do");
    const refreshBytes = w.origin.stats.bytesOut;
    const before = first.packs as { hash: string; bytes: number }[];
    const after = second.packs as { hash: string; bytes: number }[];
    assert(after.length > before.length, "a new layer was added");
    assertEquals(after.slice(0, before.length), before, "old layers kept");
    const firstBytes = before.reduce((n, p) => n + p.bytes, 0);
    assert(
      refreshBytes < firstBytes / 5,
      `stale clone and refresh cost the origin ${refreshBytes} bytes; the snapshot is ${firstBytes}`,
    );
    const trace = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/fresh`]);
    assertEquals(urisFetched(trace).length, after.length, "all layers by URI");
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/fresh`);
  });

  t(
    "a tag moved since the build: the clone passes through and gets no stale tag object",
    async (w) => {
      const { bare } = await makeRepo(w.origin, "r.git", { commits: 10, branches: 2, tags: 2 });
      await warm(w.edge, "r.git");
      const tag = Object.keys(await refsOf(bare)).find((r) => r.startsWith("refs/tags/"));
      assert(tag, "a tag in the repository");
      // The same name, a new annotated tag object on another commit; nothing else moves.
      await w.git(["tag", "-f", "-a", "-m", "moved", tag.slice("refs/tags/".length), "main~1"], {
        cwd: bare,
      });
      await w.git(["clone", "-q", "--mirror", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
      const before = (await passthroughCounts(w.edge))["wants part of the snapshot"] ?? 0;
      const trace = await w.tracedGit([
        ...URI_CLONE,
        "--mirror",
        `${w.edge.url}/r.git`,
        `${w.dir}/e`,
      ]);
      assertEquals(urisFetched(trace), [], "no snapshot pack: it holds the tag's old object");
      assertEquals(
        (await passthroughCounts(w.edge))["wants part of the snapshot"],
        before + 1,
        "passed through as wanting part of the snapshot",
      );
      await assertSameClone(`${w.dir}/direct`, `${w.dir}/e`);
      await assertSameObjects(`${w.dir}/direct`, `${w.dir}/e`);
    },
  );

  t("fetch, shallow, partial, single-branch clones and push work through the edge", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 15, branches: 2, tags: 1 });
    await warm(w.edge, "r.git");
    const url = `${w.edge.url}/r.git`;
    await w.git([...URI_CLONE.slice(0, 4), "clone", "-q", url, `${w.dir}/c`]);
    await addCommits(w.origin, "r.git", { commits: 2 });
    // Each kind of fetch that must not get URIs: none fetched, and counted under its reason.
    const passedThrough = async (reason: string, run: () => Promise<string>) => {
      const before = (await passthroughCounts(w.edge))[reason] ?? 0;
      const trace = await run();
      assertEquals(urisFetched(trace), [], `${reason}: no packfile URIs`);
      const after = (await passthroughCounts(w.edge))[reason] ?? 0;
      assert(after > before, `${reason}: counted as passthrough (${before} -> ${after})`);
    };
    await passedThrough(
      "incremental fetch",
      () =>
        w.tracedGit(["-c", "fetch.uriProtocols=http", "fetch", "-q", "origin"], {
          cwd: `${w.dir}/c`,
        }),
    );
    await w.git(["pull", "-q", "--ff-only"], { cwd: `${w.dir}/c` });
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/c` });
    const originRefs = await refsOf(`${w.origin.root}/r.git`);
    const head = (await w.git(["rev-parse", "HEAD"], { cwd: `${w.dir}/c` })).trim();
    assertEquals(head, originRefs["refs/heads/main"], "pulled to origin's main");

    await passedThrough(
      "shallow",
      () => w.tracedGit([...URI_CLONE, "--depth", "1", url, `${w.dir}/shallow`]),
    );
    assertEquals(
      (await w.git(["rev-list", "--count", "HEAD"], { cwd: `${w.dir}/shallow` })).trim(),
      "1",
      "depth 1",
    );
    await passedThrough(
      "partial clone",
      () => w.tracedGit([...URI_CLONE, "--filter=blob:none", url, `${w.dir}/partial`]),
    );
    await w.git(["fsck", "--connectivity-only"], { cwd: `${w.dir}/partial` });
    // wait-for-done (the client will say when negotiation is done): passed through untouched.
    // Without haves git's upload-pack answers with the pack at once; the edge adds no URIs.
    const tip = (await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"];
    const before = (await passthroughCounts(w.edge))["wait-for-done"] ?? 0;
    const request = ["command=fetch\n", "delim", `want ${tip}\n`, "wait-for-done\n"];
    const negotiation = await postUploadPack(
      url,
      encodePkts([...request, "packfile-uris http\n", "flush"]),
    );
    const answer = latin1(new Uint8Array(await negotiation.arrayBuffer()));
    assertEquals(negotiation.status, 200, answer.slice(0, 200));
    assert(answer.includes("packfile\n"), `a packfile: ${answer.slice(0, 200)}`);
    assert(!answer.includes("packfile-uris"), `no packfile-uris: ${answer.slice(0, 200)}`);
    assertEquals(
      (await passthroughCounts(w.edge))["wait-for-done"],
      before + 1,
      "counted as wait-for-done",
    );
    await w.git([...URI_CLONE, "--single-branch", "--branch", "main", url, `${w.dir}/single`]);
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/single` });

    await Deno.writeTextFile(`${w.dir}/c/pushed.txt`, "through the edge\n");
    await w.git(["add", "pushed.txt"], { cwd: `${w.dir}/c` });
    await w.git(["commit", "-qm", "push through edge"], { cwd: `${w.dir}/c` });
    await w.git(["push", "-q", "origin", "HEAD:main"], { cwd: `${w.dir}/c` });
    const pushed = (await w.git(["rev-parse", "HEAD"], { cwd: `${w.dir}/c` })).trim();
    assertEquals(
      (await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"],
      pushed,
      "push landed",
    );
  });

  t(
    "single-branch, --no-tags and one-commit fetches get exactly what a direct one does",
    async (w) => {
      const { bare } = await makeRepo(w.origin, "r.git", {
        commits: 12,
        branches: 2,
        tags: 2,
        merges: false,
        binaryBytes: 200_000,
      });
      // A tag on a branch a single-branch clone of main never sees: git would follow it to any
      // commit it has, so handing such a clone the whole snapshot shows up as an extra ref.
      await w.git(["tag", "-a", "-m", "on a branch", "v-feature", "refs/heads/feature-0"], {
        cwd: bare,
      });
      const snap = await warm(w.edge, "r.git");
      const cases: [string, string[]][] = [
        ["single-branch", ["--single-branch", "--branch", "main"]],
        ["single-branch-feature", ["--single-branch", "--branch", "feature-1"]],
        ["no-tags", ["--no-tags"]],
        ["full", []],
      ];
      const bytes: Record<string, [number, number]> = {};
      for (const [name, opts] of cases) {
        w.origin.stats.reset();
        await w.git([...URI_CLONE, ...opts, w.origin.repoUrl("r.git"), `${w.dir}/${name}-direct`]);
        const direct = w.origin.stats.bytesOut;
        w.origin.stats.reset();
        const trace = await w.tracedGit([
          ...URI_CLONE,
          ...opts,
          `${w.edge.url}/r.git`,
          `${w.dir}/${name}`,
        ]);
        const uris = urisFetched(trace);
        const byUri = (snap.packs as { hash: string; bytes: number }[])
          .filter((p) => uris.some((u) => u.hash === p.hash))
          .reduce((n, p) => n + p.bytes, 0);
        bytes[name] = [direct, w.origin.stats.bytesOut + byUri];
        await assertSameClone(`${w.dir}/${name}-direct`, `${w.dir}/${name}`);
        await assertSameObjects(`${w.dir}/${name}-direct`, `${w.dir}/${name}`);
        assertEquals(uris.length > 0, name === "full", `${name}: URIs only where they fit`);
      }
      // One commit fetched into an empty repository.
      const commit = (await refsOf(bare))["refs/heads/feature-1"];
      for (
        const [dir, url] of [["one", `${w.edge.url}/r.git`], [
          "one-direct",
          w.origin.repoUrl("r.git"),
        ]]
      ) {
        await w.git(["init", "-q", `${w.dir}/${dir}`]);
        await w.git(["-c", "fetch.uriProtocols=http", "fetch", "-q", url, commit], {
          cwd: `${w.dir}/${dir}`,
        });
      }
      await assertSameObjects(`${w.dir}/one-direct`, `${w.dir}/one`);
      const ratio = (n: string) => (bytes[n][1] / bytes[n][0]).toFixed(2);
      console.log(
        `bytes downloaded through the edge / direct: single-branch ${ratio("single-branch")}, ` +
          `no-tags ${ratio("no-tags")}, full ${ratio("full")} (${JSON.stringify(bytes)})`,
      );
    },
  );

  t("repository paths beyond [A-Za-z0-9._~-] proxy; traversal still refused", async (w) => {
    const names = ["a+b.git", "a@b.git", "a b.git", "ünï.git", "x/y z+ü.git"];
    for (const name of names) await makeRepo(w.origin, name, { commits: 3, tags: 1 });
    await Promise.all(names.map(async (name, i) => {
      const edgeUrl = `${w.edge.url}/${new URL(w.origin.repoUrl(name)).pathname.slice(1)}`;
      await w.git(["clone", "-q", "--mirror", w.origin.repoUrl(name), `${w.dir}/d${i}`]);
      await w.git([...URI_CLONE, "--mirror", edgeUrl, `${w.dir}/e${i}`]);
      await assertSameClone(`${w.dir}/d${i}`, `${w.dir}/e${i}`);
    }));
    assertEquals((await warm(w.edge, "a%20b.git")).state, "ready", "warm an encoded path");
    // Sent as written: the runtime's URL parsing resolves encoded dot segments (never above the
    // root), the edge refuses a backslash or a control character.
    for (const path of ["%2e%2e/%2e%2e/etc.git", "a/%2E%2E/%2e%2e/x.git"]) {
      const st = await rawStatusOf(w.edge.url, `/${path}/info/refs?service=git-upload-pack`);
      assert(st === 400 || st === 404, `${path}: ${st}`);
    }
    for (const path of ["a%5C..%5Cb.git", "a%00.git", "a%0a.git"]) {
      assertEquals(await rawStatusOf(w.edge.url, `/${path}/info/refs`), 400, path);
    }
  });

  t("SHA-256 and empty repositories: warm answers, clones equal direct ones", async (w) => {
    await makeRepo(w.origin, "s.git", { commits: 15, branches: 1, tags: 1, binaryBytes: 300_000 }, {
      objectFormat: "sha256",
    });
    const snap = await warm(w.edge, "s.git");
    const packs = snap.packs as { hash: string }[];
    assertEquals(snap.state, "ready", "SHA-256 snapshot");
    assert(packs.length > 0 && packs.every((p) => p.hash.length === 64), JSON.stringify(packs));
    await w.git(["clone", "-q", w.origin.repoUrl("s.git"), `${w.dir}/s-direct`]);
    const trace = await w.tracedGit([...URI_CLONE, `${w.edge.url}/s.git`, `${w.dir}/s-edge`]);
    assertEquals(
      urisFetched(trace).map((u) => u.hash).sort(),
      packs.map((p) => p.hash).sort(),
      "every SHA-256 pack by URI",
    );
    await assertSameClone(`${w.dir}/s-direct`, `${w.dir}/s-edge`);
    await assertSameObjects(`${w.dir}/s-direct`, `${w.dir}/s-edge`);

    await w.origin.createBare("e.git");
    const empty = await warm(w.edge, "e.git");
    assertEquals([empty.state, empty.packs, empty.tips], ["ready", [], []], "empty snapshot");
    await w.git(["clone", "-q", w.origin.repoUrl("e.git"), `${w.dir}/e-direct`]);
    await w.git([...URI_CLONE, `${w.edge.url}/e.git`, `${w.dir}/e-edge`]);
    await assertSameClone(`${w.dir}/e-direct`, `${w.dir}/e-edge`);
  });

  t(
    "git http-fetch resuming a complete .temp at its end (Range: bytes=<size>-) succeeds",
    async (w) => {
      await makeRepo(w.origin, "r.git", { commits: 8, binaryBytes: 200_000 });
      await warm(w.edge, "r.git");
      const trace = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/c`]);
      const { hash, uri } = urisFetched(trace)[0];
      const pack = new Uint8Array(await (await fetch(uri)).arrayBuffer());
      // What an interrupted download leaves when the connection drops after the last byte.
      await w.git(["init", "-q", "--bare", `${w.dir}/r`]);
      await Deno.writeFile(`${w.dir}/r/objects/pack/pack-${hash}.pack.temp`, pack);
      await w.git([
        "http-fetch",
        `--packfile=${hash}`,
        "--index-pack-arg=index-pack",
        "--index-pack-arg=--stdin",
        "--index-pack-arg=--keep",
        uri,
      ], { cwd: `${w.dir}/r` });
      await w.git(["verify-pack", `${w.dir}/r/objects/pack/pack-${hash}.idx`]);
      const res = await fetch(uri, { headers: { range: `bytes=${pack.length}-` } });
      assertEquals(
        [res.status, res.headers.get("cache-control")],
        [204, "no-store"],
        "nothing left",
      );
      await res.body?.cancel();
    },
  );

  t("bundle-uri and other commands the edge does not act on pass through as sent", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 12, branches: 2, tags: 1 });
    const bundles = bundleUris ? await w.origin.publishBundle("r.git") : null;
    await addCommits(w.origin, "r.git", { commits: 2 });
    const url = `${w.edge.url}/r.git`;
    const bundleClone = ["-c", "transfer.bundleURI=true", ...URI_CLONE.slice(0, 4), "clone", "-q"];
    await w.git([...bundleClone, "--mirror", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
    w.origin.stats.reset();
    await w.git([...bundleClone, "--mirror", url, `${w.dir}/edge`]);
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/edge`);
    const downloads = w.origin.stats.byPath[`GET ${new URL(bundles ?? "http://x/").pathname}`];
    if (bundles && gits.client.version[1] >= 40) {
      assert(downloads?.requests >= 1, `the client downloaded the bundle list's bundle`);
    }
    // object-info with its capability lines before command= (git >= 2.40 writes them so): the
    // origin gets the request as sent, and the answer is the origin's own.
    await w.git(["config", "transfer.advertiseObjectInfo", "true"], {
      cwd: `${w.origin.root}/r.git`,
    });
    const main = (await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"];
    const info = encodePkts([
      "agent=git/2.55.0",
      "object-format=sha1",
      "command=object-info",
      "delim",
      "size",
      `oid ${main}`,
      "flush",
    ]);
    const viaEdge = await postUploadPack(url, info);
    const direct = await postUploadPack(w.origin.repoUrl("r.git"), info);
    const answer = await direct.text();
    assert(answer.includes(main), `the origin answers object-info: ${answer}`);
    assertEquals([viaEdge.status, await viaEdge.text()], [200, answer], "object-info");
  });

  // Bundle URIs from the snapshot: clone fetches bundles from git 2.40 on (2.39 does not).
  const bundleClient = gits.client.version[0] > 2 ||
    (gits.client.version[0] === 2 && gits.client.version[1] >= 40);
  if (bundleClient) {
    t("a transfer.bundleURI clone of a warm repository takes one bundle per layer", async (w) => {
      await makeRepo(w.origin, "r.git", {
        commits: 20,
        branches: 2,
        tags: 1,
        binaryBytes: 400_000,
      });
      await warm(w.edge, "r.git");
      await addCommits(w.origin, "r.git", { commits: 2, tag: "v-next" });
      await warm(w.edge, "r.git");
      await w.git(["clone", "-q", "--mirror", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
      await w.git([
        "-c",
        "transfer.bundleURI=true",
        "clone",
        "-q",
        "--mirror",
        `${w.edge.url}/r.git`,
        `${w.dir}/edge`,
      ]);
      const text = await (await fetch(`${w.edge.url}/_edge/metrics`)).text();
      assertMatch(text, /^gitedge_bundles_served_total 2$/m, "both layers' bundles");
      const refs = await refsOf(`${w.dir}/edge`);
      const applied = Object.keys(refs).filter((r) => r.startsWith("refs/bundles/"));
      assert(applied.includes("refs/bundles/tags/v-next"), `the newest layer: ${applied}`);
      for (const r of applied) await w.git(["update-ref", "-d", r], { cwd: `${w.dir}/edge` });
      await assertSameClone(`${w.dir}/direct`, `${w.dir}/edge`);
    });
  }

  t("twenty clones during the first build all succeed and one build runs", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 20, binaryBytes: 300_000 });
    const url = `${w.edge.url}/r.git`;
    const clones = Array.from(
      { length: 20 },
      (_, i) => w.git([...URI_CLONE, url, `${w.dir}/c${i}`]),
    );
    await Promise.all(clones);
    for (let i = 0; i < 20; i += 7) await w.git(["fsck", "--full"], { cwd: `${w.dir}/c${i}` });
    // Wait for the background build to finish, then check it ran once.
    await w.edge.settled("r.git", (st) => st.state === "ready");
    const st = await status(w.edge, "r.git");
    assertEquals(st.state, "ready", "built in the background");
    assertEquals(st.builds, 1, "exactly one build");
  });

  t("bad input and faults get clear errors or a safe fallback", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 10, binaryBytes: 300_000 });
    const snap = await warm(w.edge, "r.git");
    // Malformed pkt-lines.
    const bad = await fetch(`${w.edge.url}/r.git/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
      },
      body: "zzzzcommand=fetch\n",
    });
    assertEquals(bad.status, 400, "malformed pkt-line");
    assert((await bad.text()).includes("gitedge"), "clear message");
    // Paths escaping the repository, sent as raw bytes (fetch would normalise `..` away): the
    // edge's own guard answers, and the origin sees nothing.
    const before = w.origin.stats.requests;
    for (
      const target of [
        "/r.git/..%2f..%2fetc/passwd/info/refs?service=git-upload-pack",
        "/..%2F..%2Fetc/passwd/info/refs?service=git-upload-pack",
        "/r.git/%2e%2e%2f%2e%2e%2fsecret.git/info/refs?service=git-upload-pack",
      ]
    ) {
      const res = await rawGet(w.edge.url, target);
      assertEquals(res.status, 400, `${target}: ${res.body}`);
      assert(res.body.startsWith("gitedge: bad repository path"), `${target}: ${res.body}`);
    }
    assertEquals(w.origin.stats.requests, before, "no escaping path reached the origin");
    // A literal `..` in the request line is resolved by the server's URL parsing before routing:
    // whatever answers, no path outside the origin's repositories is asked for.
    const dotted = await rawGet(w.edge.url, "/r.git/../../etc/passwd/info/refs");
    assert(dotted.status === 400 || dotted.status === 404, `literal ..: ${dotted.status}`);
    const asked = Object.keys(w.origin.stats.byPath);
    assert(!asked.some((k) => /\.\.|%2e/i.test(k)), `origin asked for ${asked.join(", ")}`);
    // A bogus signature and an expired URL.
    const trace = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/a`]);
    const uri = urisFetched(trace)[0].uri;
    const forged = uri.replace(/sig=[^&]+/, "sig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    assertEquals(await statusOf(forged), 403, "forged signature refused");
    const expired = uri.replace(/exp=\d+/, "exp=1000");
    assertEquals(await statusOf(expired), 403, "expired URL refused");
    const ok = await fetch(uri, { headers: { range: "bytes=0-3" } });
    assertEquals(ok.status, 206, "range request");
    assertEquals(await ok.text(), "PACK", "pack starts with PACK");
    // The whole pack, then HEAD, an unsatisfiable range, If-Range and caching headers.
    const whole = await fetch(uri);
    const bytes = new Uint8Array(await whole.arrayBuffer());
    const size = bytes.length;
    const etag = whole.headers.get("etag");
    assertEquals(whole.status, 200, "whole pack");
    assert(etag && /^"[^"]+"$/.test(etag), `a strong ETag: ${etag}`);
    assertMatch(whole.headers.get("cache-control") ?? "", /\bimmutable\b/, "immutable");
    assertMatch(whole.headers.get("cache-control") ?? "", /\bmax-age=\d+/, "max-age");
    assertEquals(whole.headers.get("accept-ranges"), "bytes", "accept-ranges");
    const head = await fetch(uri, { method: "HEAD" });
    assertEquals(head.status, 200, "HEAD");
    assertEquals(head.headers.get("content-length"), String(size), "HEAD length");
    assertEquals(head.headers.get("etag"), etag, "HEAD ETag");
    assertEquals((await head.arrayBuffer()).byteLength, 0, "HEAD has no body");
    // (`bytes=<size>-` exactly is git resuming a complete download: 204, tested above.)
    const past = await fetch(uri, { headers: { range: `bytes=${size + 1}-` } });
    await past.body?.cancel();
    assertEquals(past.status, 416, "range past the end");
    assertEquals(past.headers.get("content-range"), `bytes */${size}`, "416 content-range");
    const tail = await fetch(uri, { headers: { range: "bytes=-20", "if-range": etag } });
    assertEquals(tail.status, 206, "If-Range with the current ETag: the range");
    assertEquals(tail.headers.get("content-range"), `bytes ${size - 20}-${size - 1}/${size}`);
    assertEquals(new Uint8Array(await tail.arrayBuffer()), bytes.subarray(size - 20), "the tail");
    const stale = await fetch(uri, { headers: { range: "bytes=-20", "if-range": '"other"' } });
    assertEquals(stale.status, 200, "If-Range with another ETag: the whole pack");
    assertEquals((await stale.arrayBuffer()).byteLength, size, "whole pack again");
    // A pack deleted from the store: the snapshot is not advertised, clones pass through.
    const keys = await w.edge.listStored("repos/");
    const packKey = keys.find((k) => k.endsWith(".pack"));
    assert(packKey, `a stored pack (${keys.join(", ")})`);
    await w.edge.deleteStored(packKey);
    const trace2 = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/b`]);
    assertEquals(urisFetched(trace2).length, 0, "no URIs for a broken snapshot");
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/b` });
    // That clone also started a fresh rebuild; once it is in, URIs flow again.
    await w.edge.settled("r.git", (st) => st.builds === 2);
    const st = await status(w.edge, "r.git");
    assertEquals(st.builds, 2, "the broken snapshot was rebuilt");
    const trace3 = await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/b2`]);
    assertEquals(
      urisFetched(trace3).length,
      (st.packs as unknown[]).length,
      "URIs again after the rebuild",
    );
    void snap;
    // A stopped origin: 502 with a message git prints.
    await w.origin.stop();
    const err = await w.git(["clone", "-q", `${w.edge.url}/r.git`, `${w.dir}/c`]).then(
      () => "",
      (e: GitCommandError) => e.stderr,
    );
    assert(/502|origin unreachable/.test(err), `git reports the unreachable origin: ${err}`);
  });

  t(
    "a private origin: credentials pass through, URIs only after the origin authorised",
    async (w) => {
      await makeRepo(w.origin, "p.git", { commits: 12, binaryBytes: 300_000 });
      const anon = `${w.edge.url}/p.git`;
      const authed = anon.replace("http://", "http://alice:s3cret@");
      // Without credentials git sees the origin's 401 and fails (no prompt in tests).
      const denied = await w.git(["clone", "-q", anon, `${w.dir}/x`]).then(
        () => "",
        (e) => String(e),
      );
      assert(
        /Authentication failed|could not read Username|401/.test(denied),
        `401 reaches git: ${denied}`,
      );
      // An anonymous fetch asking for URIs is refused by the origin and starts no build.
      const tip = (await refsOf(`${w.origin.root}/p.git`))["refs/heads/main"];
      const refused = await postUploadPack(`${w.edge.url}/p.git`, uriFetch(tip));
      assertEquals(refused.status, 401, "anonymous fetch refused by the origin");
      await refused.body?.cancel();
      const basic = `Basic ${btoa("alice:s3cret")}`;
      const reader = { "x-origin-authorization": basic };
      assertEquals(
        (await status(w.edge, "p.git", reader)).builds,
        0,
        "no build for the unauthorised",
      );
      // The edge cannot build a snapshot without credentials, and stores none.
      const res = await fetch(`${w.edge.url}/_edge/warm/p.git`, { method: "POST" });
      assertEquals(res.status, 401, "warm without origin credentials is refused");
      await res.body?.cancel();
      // With credentials: a clone works, and schedules a build with them (in memory only).
      await w.git(["-c", "fetch.uriProtocols=http", "clone", "-q", authed, `${w.dir}/a`]);
      await w.git(["fsck", "--full"], { cwd: `${w.dir}/a` });
      const snap = await warm(w.edge, "p.git", reader);
      assertEquals(snap.state, "ready", "warm with origin credentials");
      const trace = await w.tracedGit([...URI_CLONE, authed, `${w.dir}/b`]);
      assertEquals(
        urisFetched(trace).length,
        (snap.packs as unknown[]).length,
        "URIs with credentials",
      );
      await assertSameClone(`${w.dir}/a`, `${w.dir}/b`);
      // The origin accepted alice moments ago (ls-refs): the edge answered her fetch itself.
      w.origin.stats.reset();
      await w.tracedGit([...URI_CLONE, authed, `${w.dir}/c`]);
      await assertSameClone(`${w.dir}/a`, `${w.dir}/c`);
      assertEquals(
        w.origin.stats.byPath["POST /p.git/git-upload-pack"]?.requests,
        1,
        `only ls-refs reached the origin: ${JSON.stringify(w.origin.stats.byPath)}`,
      );
      // Her shallow clones: the second is answered from the response cache.
      w.origin.stats.reset();
      await w.git([...URI_CLONE, "--depth", "1", authed, `${w.dir}/s1`]);
      await w.git([...URI_CLONE, "--depth", "1", authed, `${w.dir}/s2`]);
      await assertSameClone(`${w.dir}/s1`, `${w.dir}/s2`);
      assertEquals(w.origin.stats.commands.fetch, 1, "one shallow fetch reached the origin");
      // A cached shallow answer, with include-tag (an anonymous tag listing is refused) and
      // without (no memo): alice's second ask is a hit, so the entry is there; the same bytes
      // without credentials get the origin's 401, and no cached bytes.
      for (const extra of [["include-tag\n"], []]) {
        const body = encodePkts([
          "command=fetch\n",
          "object-format=sha1\n",
          "delim",
          "thin-pack\n",
          "ofs-delta\n",
          ...extra,
          `want ${(snap.tips as string[])[0]}\n`,
          "deepen 1",
          "done\n",
          "flush",
        ]) as Uint8Array<ArrayBuffer>;
        const ask = (authorization?: string) =>
          fetch(`${w.edge.url}/p.git/git-upload-pack`, {
            method: "POST",
            headers: {
              "git-protocol": "version=2",
              "content-type": "application/x-git-upload-pack-request",
              ...(authorization ? { authorization } : {}),
            },
            body,
          });
        const what = `shallow fetch (${extra.join("").trim() || "no include-tag"})`;
        const first = await ask(basic);
        assert((await first.text()).includes("PACK"), `alice: a pack (${what})`);
        w.origin.stats.reset();
        const again = await ask(basic);
        assert((await again.text()).includes("PACK"), `alice again: a pack (${what})`);
        assertEquals(w.origin.stats.commands.fetch ?? 0, 0, `alice again: a cache hit (${what})`);
        const res = await ask();
        assertEquals(res.status, 401, `anonymous ${what}`);
        assert(!(await res.text()).includes("PACK"), `no pack to the anonymous (${what})`);
        assertEquals(w.origin.stats.commands.fetch ?? 0, 0, `anonymous: no fetch (${what})`);
      }
      // Another credential is not vouched for by alice's: its fetch goes to the origin, refused.
      const wrong = await fetch(`${w.edge.url}/p.git/git-upload-pack`, {
        method: "POST",
        headers: {
          "git-protocol": "version=2",
          "content-type": "application/x-git-upload-pack-request",
          authorization: `Basic ${btoa("alice:wrong")}`,
        },
        body: uriFetch((snap.tips as string[])[0]) as Uint8Array<ArrayBuffer>,
      });
      assertEquals(wrong.status, 401, "a wrong password is refused by the origin");
      assert(!(await wrong.text()).includes("/_edge/packs/"), "no URIs to a wrong password");
      // A snapshot exists now, yet an anonymous fetch still gets the origin's 401 and no URIs.
      const tips = snap.tips as string[];
      const anonFetch = await postUploadPack(`${w.edge.url}/p.git`, uriFetch(tips[0]));
      assertEquals(anonFetch.status, 401, "anonymous fetch refused by the origin");
      assert(anonFetch.headers.get("www-authenticate")?.startsWith("Basic"), "challenge forwarded");
      assert(!(await anonFetch.text()).includes("/_edge/packs/"), "no URIs to the unauthorised");
      // A plain clone's fetch of every snapshot tip (what the edge streams from the snapshot):
      // anonymous or with a wrong password, the origin's 401 and no pack bytes; alice's, a pack.
      const plain = encodePkts([
        "command=fetch\n",
        "delim",
        "thin-pack\n",
        "ofs-delta\n",
        "no-progress\n",
        ...[...new Set(tips)].map((t) => `want ${t}\n`),
        "done\n",
        "flush",
      ]);
      for (const authorization of [undefined, `Basic ${btoa("alice:wrong")}`, basic]) {
        const res = await fetch(`${w.edge.url}/p.git/git-upload-pack`, {
          method: "POST",
          headers: {
            "git-protocol": "version=2",
            "content-type": "application/x-git-upload-pack-request",
            ...(authorization ? { authorization } : {}),
          },
          body: plain as Uint8Array<ArrayBuffer>,
        });
        const body = latin1(new Uint8Array(await res.arrayBuffer()));
        const who = authorization === basic ? "alice" : authorization ? "a wrong password" : "anon";
        assertEquals(res.status, authorization === basic ? 200 : 401, `plain fetch by ${who}`);
        assertEquals(body.includes("PACK"), authorization === basic, `pack bytes to ${who}`);
      }
      // No credential in any stored key or object (manifest, packs, cached answers), in clear
      // text or as the Basic header's base64.
      const stored = await w.edge.listStored("");
      assert(stored.some((k) => k.endsWith("manifest.json")), `a manifest: ${stored.join(", ")}`);
      const secrets = ["s3cret", "alice:", btoa("alice:s3cret")];
      for (const key of stored) {
        const text = `${key}\n${latin1(await w.edge.readStored(key))}`;
        const found = secrets.filter((secret) => text.includes(secret));
        assertEquals(found, [], `credentials stored in ${key}`);
      }
    },
    { originOptions: { requireAuth: { user: "alice", password: "s3cret" } } },
  );

  t("metrics count requests, URIs handed out, cache and origin bytes", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 10, binaryBytes: 300_000 });
    await warm(w.edge, "r.git");
    await w.tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/a`]);
    const text = await (await fetch(`${w.edge.url}/_edge/metrics`)).text();
    const value = (name: string) =>
      Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, "m").exec(text)?.[1] ?? NaN);
    assert(value("gitedge_packfile_uris_total") >= 2, `URIs counted:\n${text}`);
    assert(value("gitedge_cache_bytes_total") > 300_000, "cache bytes counted");
    assert(value("gitedge_origin_bytes_total") > 0, "origin bytes counted");
    assertEquals(value("gitedge_snapshot_builds_total"), 1, "one build");
  });

  t("oversized requests the edge parses get 413; pushes stream through", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 3 });
    // A well-formed request that just goes on: only the byte limit can stop it.
    const want = `want ${"a".repeat(40)}\n`;
    const lines = Array.from({ length: 2000 }, () => want);
    const big = encodePkts(["command=fetch\n", "delim", ...lines, "flush"]);
    const res = await postUploadPack(`${w.edge.url}/r.git`, big);
    assertEquals(res.status, 413, "too large");
    assert((await res.text()).includes("exceeds"), "says why");
    // The cap is for requests the edge parses; a push streams through whatever its size.
    await w.git(["clone", "-q", `${w.edge.url}/r.git`, `${w.dir}/c`]);
    await Deno.writeFile(`${w.dir}/c/big.bin`, crypto.getRandomValues(new Uint8Array(60_000)));
    await Deno.writeFile(`${w.dir}/c/big2.bin`, crypto.getRandomValues(new Uint8Array(60_000)));
    await w.git(["add", "."], { cwd: `${w.dir}/c` });
    await w.git(["commit", "-qm", "a push larger than the cap"], { cwd: `${w.dir}/c` });
    await w.git(["push", "-q", "origin", "HEAD:main"], { cwd: `${w.dir}/c` });
    const pushed = (await w.git(["rev-parse", "HEAD"], { cwd: `${w.dir}/c` })).trim();
    assertEquals((await refsOf(`${w.origin.root}/r.git`))["refs/heads/main"], pushed, "pushed");
  }, { edge: () => ({ maxRequestBytes: 16 * 1024 }) });

  t("multi-origin mode reaches allow-listed hosts only", async (w) => {
    await makeRepo(w.origin, "m.git", { commits: 5 });
    const host = new URL(w.origin.url).host;
    await w.git(["clone", "-q", `${w.edge.url}/${host}/m.git`, `${w.dir}/a`]);
    await w.git(["fsck", "--full"], { cwd: `${w.dir}/a` });
    const res = await fetch(`${w.edge.url}/evil.example/m.git/info/refs?service=git-upload-pack`);
    assertEquals(res.status, 403, "host not on the allowlist");
    await res.body?.cancel();
  }, { edge: (o) => ({ origin: undefined, allowHosts: [new URL(o.url).host] }) });

  t("an admin token guards warm and status", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 4 });
    for (const [method, route] of [["POST", "warm"], ["GET", "status"]]) {
      for (const authorization of [undefined, "Bearer wrong", "Bearer s3cret-admi"]) {
        const res = await fetch(`${w.edge.url}/_edge/${route}/r.git`, {
          method,
          headers: authorization ? { authorization } : {},
        });
        assertEquals(res.status, 401, `${route} with ${authorization ?? "no token"}`);
        await res.body?.cancel();
      }
    }
    const admin = { authorization: "Bearer s3cret-admin" };
    assertEquals((await warm(w.edge, "r.git", admin)).state, "ready", "warm with the token");
    const res = await fetch(`${w.edge.url}/_edge/status/r.git`, { headers: admin });
    assertEquals(res.status, 200, "status with the token");
    await res.body?.cancel();
    // Git traffic itself needs no admin token.
    await w.git(["clone", "-q", `${w.edge.url}/r.git`, `${w.dir}/a`]);
  }, { edge: () => ({ adminToken: "s3cret-admin" }) });
}
