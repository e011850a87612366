/**
 * Edge suite part: Clones from the snapshot: packs by URI, answered by the edge, streamed plain clones, refreshes, bundle URIs, object formats, resumed downloads, the first build under load.
 * Registered per runtime by `edgeSuite` (edge_suite.ts).
 */
import {
  addCommits,
  assertSameClone,
  assertSameObjects,
  makeRepo,
  refsOf,
} from "../support/fixtures.ts";
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { URI_CLONE, urisFetched } from "../support/traced_git.ts";
import { passthroughCounts, status, type Suite, warm } from "./edge_world.ts";

export function snapshotCases({ t, gits }: Suite): void {
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
}
