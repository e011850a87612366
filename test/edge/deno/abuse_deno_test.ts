/** Hostile traffic and faults against the Deno server (`abuse_suite.ts` plus filesystem cases). */
import { abuseSuite, assertNoServerPath } from "../../proxy/abuse_suite.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { parseServeArgs } from "../../../edge/deno/serve_cli.ts";
import { SettingError } from "../../../src/proxy/settings/resolve.ts";
import { startOrigin } from "../../support/origin.ts";
import { makeRepo } from "../../support/fixtures.ts";
import { repoId } from "../../../src/proxy/core/repo.ts";
import { assert, assertEquals, assertThrows } from "../../support/assert.ts";
import { assertSameClone } from "../../support/fixtures.ts";
import { git, tempDir } from "../../support/git.ts";
import { tracedGit, URI_CLONE, urisFetched } from "../../proxy/edge_suite.ts";
import { startServeProcess } from "../../support/serve_process.ts";

abuseSuite(denoEdgeFactory, "deno");

Deno.test("[deno] an origin URL with credentials is refused, and the refusal does not repeat them", async () => {
  for (const flag of ["--origin", "--public-url"]) {
    const args = [flag, "http://alice:s3cret@git.example/base"];
    if (flag === "--public-url") args.push("--origin", "http://git.example");
    const e = assertThrows(() => parseServeArgs(args, () => undefined), SettingError);
    assert(/without credentials/.test(e.message), e.message);
    assert(!e.message.includes("s3cret") && !e.message.includes("alice"), e.message);
  }
  const store = await Deno.makeTempDir();
  try {
    const started = await startDenoEdge({
      store,
      config: { origin: "http://alice:s3cret@127.0.0.1:9" },
    }).then((edge) => edge.stop().then(() => "started"), (e: Error) => e.message);
    assert(/without credentials/.test(started), started);
    assert(!started.includes("s3cret"), started);
  } finally {
    await Deno.remove(store, { recursive: true });
  }
});

Deno.test({
  name: "[deno] a failed build's lastError and a 500 body name no server path",
  fn: async () => {
    await using origin = await startOrigin();
    await makeRepo(origin, "r.git", { commits: 3 });
    const store = await Deno.makeTempDir({ prefix: "gitedge-store-" });
    const edge = await startDenoEdge({
      store,
      config: { origin: origin.url, chunks: 2 },
    });
    try {
      // The repository's pack directory cannot be created: a file is in the way.
      const repoDir = `${store}/repos/${repoId(`${origin.url}/r.git`)}`;
      await Deno.mkdir(repoDir, { recursive: true });
      await Deno.writeTextFile(`${repoDir}/packs`, "in the way");
      const warm = await fetch(`${edge.url}/_edge/warm/r.git`, { method: "POST" });
      const body = await warm.text();
      assertEquals(warm.status, 500, `warm fails: ${body}`);
      assertNoServerPath(body, "500 body");
      assert(!body.includes(store), body);
      const st = await (await fetch(`${edge.url}/_edge/status/r.git`)).json();
      assert(typeof st.snapshot.lastError === "string", JSON.stringify(st));
      assertNoServerPath(st.snapshot.lastError, "lastError");
      assert(!st.snapshot.lastError.includes(store), st.snapshot.lastError);
    } finally {
      await edge.stop();
      await Deno.remove(store, { recursive: true });
    }
  },
});

/** Polls status (bounded: 200 × 50 ms) until no build runs; returns it. */
async function idle(url: string, repo: string): Promise<Record<string, unknown>> {
  let st: Record<string, unknown> = {};
  for (let i = 0; i < 200; i++) {
    st = (await (await fetch(`${url}/_edge/status/${repo}`)).json()).snapshot;
    if (st.state !== "building") return st;
    await new Promise((r) => setTimeout(r, 50));
  }
  return st;
}

Deno.test({
  name: "[deno] a truncated manifest.json after a restart: clones pass through, then URIs again",
  fn: async () => {
    await using origin = await startOrigin();
    await makeRepo(origin, "r.git", { commits: 8, binaryBytes: 200_000 });
    await using dir = await tempDir();
    const store = `${dir.path}/store`;
    const config = { origin: origin.url, chunks: 2 };
    const first = await startDenoEdge({ store, config, onBuildError: () => {} });
    await fetch(`${first.url}/_edge/warm/r.git`, { method: "POST" }).then((r) => r.json());
    await first.stop();
    const manifest = `${store}/repos/${repoId(`${origin.url}/r.git`)}/manifest.json`;
    const text = await Deno.readTextFile(manifest);
    await Deno.writeTextFile(manifest, text.slice(0, text.length >> 1));
    const edge = await startDenoEdge({ store, config, onBuildError: () => {} });
    try {
      await git(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/direct`]);
      const trace = await tracedGit([...URI_CLONE, `${edge.url}/r.git`, `${dir.path}/a`]);
      assertEquals(urisFetched(trace).length, 0, "no URIs from a truncated manifest");
      await assertSameClone(`${dir.path}/direct`, `${dir.path}/a`);
      const st = await idle(edge.url, "r.git");
      // Build counts survive the restart: the first edge's build, then this rebuild.
      assertEquals([st.state, st.builds], ["ready", 2], `rebuilt: ${JSON.stringify(st)}`);
      const again = await tracedGit([...URI_CLONE, `${edge.url}/r.git`, `${dir.path}/b`]);
      assertEquals(urisFetched(again).length, (st.packs as unknown[]).length, "URIs again");
      await assertSameClone(`${dir.path}/direct`, `${dir.path}/b`);
    } finally {
      await edge.stop();
    }
  },
});

Deno.test({
  name: "[deno] an empty signing.key (a full disk on first start) no longer stops every start",
  fn: async () => {
    await using origin = await startOrigin();
    await makeRepo(origin, "r.git", { commits: 6, binaryBytes: 200_000 });
    await using dir = await tempDir();
    const store = `${dir.path}/store`;
    await Deno.mkdir(store, { recursive: true });
    await Deno.writeFile(`${store}/signing.key`, new Uint8Array(0));
    const edge = await startDenoEdge({ store, config: { origin: origin.url, chunks: 2 } });
    try {
      assertEquals((await Deno.readFile(`${store}/signing.key`)).byteLength, 32, "a new key");
      await fetch(`${edge.url}/_edge/warm/r.git`, { method: "POST" }).then((r) => r.json());
      const trace = await tracedGit([...URI_CLONE, `${edge.url}/r.git`, `${dir.path}/a`]);
      assert(urisFetched(trace).length > 0, "signed URIs work");
      await git(["fsck", "--full"], { cwd: `${dir.path}/a` });
    } finally {
      await edge.stop();
    }
    assertEquals(
      (await Array.fromAsync(Deno.readDir(store))).filter((e) => e.name.endsWith(".tmp")).length,
      0,
      "no temporary key file left",
    );
  },
});

Deno.test({
  name: "[deno] failing builds back off: three clones, one build",
  fn: async () => {
    await using origin = await startOrigin();
    await makeRepo(origin, "r.git", { commits: 4 });
    await using dir = await tempDir();
    const store = `${dir.path}/store`;
    // Every build fails: the repository's pack directory cannot be created (a file is in the way).
    const repoDir = `${store}/repos/${repoId(`${origin.url}/r.git`)}`;
    await Deno.mkdir(repoDir, { recursive: true });
    await Deno.writeTextFile(`${repoDir}/packs`, "in the way");
    // No response cache: a clone answered from it would start no build at all.
    const edge = await startDenoEdge({
      store,
      config: { origin: origin.url, chunks: 2, responseCacheBytes: 0 },
      onBuildError: () => {},
    });
    try {
      for (let i = 0; i < 3; i++) {
        await git([...URI_CLONE, `${edge.url}/r.git`, `${dir.path}/c${i}`]);
        await idle(edge.url, "r.git");
      }
      const st = await idle(edge.url, "r.git");
      assertEquals(st.builds, 1, `one build for three clones: ${JSON.stringify(st)}`);
      // Times in status are ISO 8601.
      assert(
        typeof st.retryAt === "string" && Date.parse(st.retryAt) > 0,
        `status says when: ${JSON.stringify(st)}`,
      );
      const metrics = await (await fetch(`${edge.url}/_edge/metrics`)).text();
      const deferred = Number(/^gitedge_snapshot_builds_deferred_total (\d+)/m.exec(metrics)?.[1]);
      assert(deferred >= 2, `the later clones' builds were deferred: ${deferred}`);
      // An explicit warm does not wait (and fails the same way).
      const warm = await fetch(`${edge.url}/_edge/warm/r.git`, { method: "POST" });
      await warm.body?.cancel();
      assertEquals((await idle(edge.url, "r.git")).builds, 2, "warm builds at once");
    } finally {
      await edge.stop();
    }
  },
});

Deno.test({
  name: "[deno] SIGKILL during a build leaves .tmp files that garbage collection removes",
  fn: async () => {
    await using origin = await startOrigin();
    await makeRepo(origin, "r.git", { commits: 10, binaryBytes: 6 << 20, seed: 9 });
    await using dir = await tempDir();
    const store = `${dir.path}/store`;
    // Incomplete writes (`*.tmp`) and objects of unfinished builds (`repos/<id>/tmp/`).
    const leftovers = async (all = false) => {
      const out: string[] = [];
      const walk = async (d: string) => {
        for await (const e of Deno.readDir(d)) {
          if (e.isDirectory) await walk(`${d}/${e.name}`);
          else if (
            all || e.name.endsWith(".tmp") || `${d}/`.slice(store.length).includes("/tmp/")
          ) {
            out.push(`${d}/${e.name}`);
          }
        }
      };
      await walk(`${store}/repos`).catch(() => {});
      return out;
    };
    const serve = await startServeProcess(["--origin", origin.url, "--store", store]);
    const warm = fetch(`${serve.url}/_edge/warm/r.git`, { method: "POST" }).then(
      (r) => r.body?.cancel(),
      () => {},
    );
    let orphans: string[] = [];
    for (let i = 0; i < 400 && orphans.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
      orphans = await leftovers();
    }
    Deno.kill(serve.pid, "SIGKILL");
    await serve.stop();
    await warm;
    orphans = await leftovers();
    assert(orphans.length > 0, "the kill left temporary files");
    // Older than the grace period, as they are after a while.
    const old = new Date(Date.now() - 3 * 3600_000);
    for (const f of await leftovers(true)) await Deno.utime(f, old, old);
    const edge = await startDenoEdge({
      store,
      config: { origin: origin.url, chunks: 2 },
      onBuildError: () => {},
    });
    try {
      const res = await fetch(`${edge.url}/_edge/warm/r.git`, { method: "POST" });
      assertEquals(res.status, 200, await res.text());
      assertEquals(await leftovers(), [], "no orphan survives garbage collection");
    } finally {
      await edge.stop();
    }
  },
});
