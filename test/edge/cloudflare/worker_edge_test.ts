/**
 * The gitedge Worker end to end in workerd (Miniflare: local R2, Durable Objects), in front of a
 * real `git http-backend` origin, cloned with real git. One workerd for the whole file.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import type { SnapshotStatus } from "../../../src/proxy/core/deps.ts";
import { addCommits, assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { git, spawnGit, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { startRelay } from "../../support/relay.ts";
import { listBucket, MINIFLARE_LEAKS, startWorkerEdge } from "../../support/worker_harness.ts";

/** Clones `url` into `dest` with `-c` options; returns git's stderr (trace output included). */
async function cloneTraced(url: string, dest: string, config: string[] = []): Promise<string> {
  const args = [...config.flatMap((c) => ["-c", c]), "clone", "-q", url, dest];
  const child = spawnGit(args, { env: { GIT_TRACE: "1" }, stdout: "null" });
  const out = await child.output();
  const stderr = new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`git ${args.join(" ")} failed (${out.code}):\n${stderr}`);
  return stderr;
}

/**
 * Stock git clones `edgeUrl` with packfile URIs into `work`/clone, fetching `packs` of them by URI,
 * and the clone equals a direct clone of `originUrl`.
 */
async function assertClonesByUri(
  edgeUrl: string,
  originUrl: string,
  work: string,
  packs: number,
): Promise<void> {
  const trace = await cloneTraced(edgeUrl, `${work}/clone`, ["fetch.uriProtocols=http"]);
  assertEquals(trace.split("run_command: git http-fetch ").length - 1, packs, "packs by URI");
  await git(["clone", "-q", originUrl, `${work}/direct`]);
  await assertSameClone(`${work}/direct`, `${work}/clone`);
}

/** The fulfilled values; throws the first rejection. */
function valuesOf<T>(results: PromiseSettledResult<T>[]): T[] {
  return results.map((r) => {
    if (r.status === "rejected") throw r.reason;
    return r.value;
  });
}

async function edgeJson(url: string, init?: RequestInit): Promise<{ snapshot: SnapshotStatus }> {
  const res = await fetch(url, init);
  const text = await res.text();
  assertEquals(res.status, 200, `${init?.method ?? "GET"} ${url}: ${text}`);
  return JSON.parse(text);
}

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test({ name: "gitedge Worker in workerd", ...MINIFLARE_LEAKS }, async (t) => {
  await using origin = await startOrigin();
  const app = await makeRepo(origin, "team/app.git", { commits: 16, binaryBytes: 512 * 1024 });
  // Over two 5 MiB R2 parts: the build's full pack and its two halves go through multipart.
  const big = await makeRepo(origin, "team/big.git", {
    commits: 24,
    binaryBytes: 12 << 20,
    seed: 5,
  });
  await using worker = await startWorkerEdge({
    config: { origin: origin.url, chunks: 2 },
    vars: { R2_PART_MIB: "5" },
  });
  await using dir = await tempDir();
  const direct = (name: string) => `${dir.path}/direct-${name}`;
  await git(["clone", "-q", app.url, direct("app")]);
  await git(["clone", "-q", big.url, direct("big")]);

  await t.step("a stock git clone through the Worker equals a direct clone", async () => {
    const dest = `${dir.path}/stock`;
    const trace = await cloneTraced(`${worker.url}/team/app.git`, dest);
    assert(!/_edge\/packs/.test(trace), "no pack URIs fetched");
    await assertSameClone(direct("app"), dest);
  });

  await t.step("after warm, a packfile-uris clone fetches its packs from R2", async () => {
    const warmed = await edgeJson(`${worker.url}/_edge/warm/team/app.git`, { method: "POST" });
    assertEquals(warmed.snapshot.state, "ready");
    assertEquals(warmed.snapshot.builds, 1);
    assert(warmed.snapshot.packs.length >= 1);
    const stored = (await listBucket(worker, "repos/")).filter((k) => k.endsWith(".pack"));
    assertEquals(stored.length, warmed.snapshot.packs.length);
    const packBytes = warmed.snapshot.packs.reduce((sum, p) => sum + p.bytes, 0);

    origin.stats.reset();
    const dest = `${dir.path}/uris`;
    const trace = await cloneTraced(`${worker.url}/team/app.git`, dest, [
      "fetch.uriProtocols=http",
    ]);
    // Every snapshot pack, and nothing else, was downloaded by `git http-fetch` from the Worker.
    const packUri = /\/_edge\/packs\/([0-9a-f]+)\/([0-9a-z-]+\.pack)\?/;
    const fetched = new Set(
      trace.split("\n").filter((line) => line.includes("run_command: git http-fetch "))
        .map((line) => packUri.exec(line))
        .map((m) => m ? `repos/${m[1]}/packs/${m[2]}` : "(no pack URI)"),
    );
    assertEquals([...fetched].sort(), stored, trace);
    await assertSameClone(direct("app"), dest);
    assert(
      origin.stats.bytesOut < packBytes / 4,
      `origin served ${origin.stats.bytesOut} bytes; the snapshot holds ${packBytes}`,
    );
  });

  await t.step("concurrent clones and warms during a build trigger exactly one build", async () => {
    const url = `${worker.url}/team/big.git`;
    const clones = [1, 2, 3].map((i) =>
      cloneTraced(url, `${dir.path}/big-${i}`, ["fetch.uriProtocols=http"])
    );
    const warms = [1, 2].map(() =>
      edgeJson(`${worker.url}/_edge/warm/team/big.git`, { method: "POST" })
    );
    // Settle everything before asserting, so a failure leaves no git process running.
    const [warmed, cloned] = await Promise.all([
      Promise.allSettled(warms),
      Promise.allSettled(clones),
    ]);
    valuesOf(cloned);
    const statuses = valuesOf(warmed);
    for (const { snapshot } of statuses) {
      assertEquals(snapshot.state, "ready");
      assertEquals(snapshot.builds, 1);
    }
    const after = await edgeJson(`${worker.url}/_edge/status/team/big.git`);
    assertEquals(after.snapshot.builds, 1);
    assertEquals(after.snapshot.lastError, null);
    const partBytes = 5 << 20;
    assert(
      after.snapshot.packs.every((p) => p.bytes > partBytes),
      `packs larger than one R2 part (multipart): ${JSON.stringify(after.snapshot.packs)}`,
    );
    for (const i of [1, 2, 3]) await assertSameClone(direct("big"), `${dir.path}/big-${i}`);
  });

  await t.step(
    "runners with the same clone of yesterday fetch new commits: one origin pack",
    async () => {
      const yesterday = `${dir.path}/yesterday`;
      await git(["clone", "-q", `${worker.url}/team/app.git`, yesterday]);
      const copies = ["fetch-direct", "fetch-1", "fetch-2"].map((n) => `${dir.path}/${n}`);
      for (const c of copies) {
        const cp = await new Deno.Command("cp", { args: ["-a", yesterday, c] }).output();
        assert(cp.success, `cp -a ${yesterday} ${c}`);
      }
      const [directFetch, ...runners] = copies;
      await git(["remote", "set-url", "origin", app.url], { cwd: directFetch });
      await addCommits(origin, "team/app.git", { commits: 5, tag: "nightly" });
      await git(["fetch", "-q"], { cwd: directFetch });
      origin.stats.reset();
      // The second asks for packfile URIs: an incremental fetch gets none, and asks the same.
      await git(["fetch", "-q"], { cwd: runners[0] });
      await git(["-c", "fetch.uriProtocols=http", "fetch", "-q"], { cwd: runners[1] });
      assertEquals(origin.stats.commands.fetch, 1, "the second runner's answer came from R2");
      for (const r of runners) await assertSameClone(directFetch, r);
    },
  );
});

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test({
  name: "a Worker build runs one step per invocation; killed between steps, it resumes",
  ...MINIFLARE_LEAKS,
}, async () => {
  await using origin = await startOrigin();
  const repo = await makeRepo(origin, "team/steps.git", { commits: 20, binaryBytes: 14 << 20 });
  await using dir = await tempDir();
  const persistDir = `${dir.path}/state`;
  const options = {
    config: { origin: origin.url, chunks: 3 },
    vars: { R2_PART_MIB: "5" },
    persistDir,
  };
  const status = async (url: string) =>
    (await edgeJson(`${url}/_edge/status/team/steps.git`)).snapshot;

  {
    // The first workerd starts the build and is killed once a step past the fetch has run.
    await using first = await startWorkerEdge(options);
    const warm = fetch(`${first.url}/_edge/warm/team/steps.git`, { method: "POST" })
      .then((res) => res.body?.cancel(), () => {});
    for (;;) {
      const s = await status(first.url);
      // "none" until the warm reaches the Durable Object; never "ready" before the kill.
      assert(s.state !== "ready" && s.lastError === null, JSON.stringify(s));
      if (s.pending && s.pending.packsWritten >= 1) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await first.kill();
    await warm;
  }
  // A new workerd over the same storage: the armed alarm carries the build on.
  await using second = await startWorkerEdge(options);
  let after = await status(second.url);
  for (let i = 0; after.state !== "ready"; i++) {
    assert(i < 3000, `the build resumes: ${JSON.stringify(after)}`);
    await new Promise((r) => setTimeout(r, 20));
    after = await status(second.url);
  }
  assertEquals(after.builds, 1, "resumed, not restarted");
  assertEquals(after.lastError, null);
  assertEquals(after.packs.length, 3);
  // First invocation (tips, pack), three packs, publication: each step an invocation of its own.
  assertEquals(after.lastBuild?.invocations, 5);
  assert(after.lastBuild!.maxSubrequests > 0 && after.lastBuild!.maxSubrequests <= 1000);
  const keys = await listBucket(second, "repos/");
  assertEquals(keys.filter((k) => k.includes("/tmp/")), [], "temporary objects removed");

  await assertClonesByUri(`${second.url}/team/steps.git`, repo.url, dir.path, 3);
});

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test({
  name: "a Worker build killed inside its fetch step starts over and publishes nothing partial",
  ...MINIFLARE_LEAKS,
}, async () => {
  await using origin = await startOrigin();
  const repo = await makeRepo(origin, "team/cut.git", { commits: 12, binaryBytes: 12 << 20 });
  // The origin's pack stops after 6 MiB (a whole segment, R2_PART_MIB is 5) until the kill, so the
  // fetch step is still running whatever the machine's load.
  await using slow = await startRelay(origin.url, {
    faults: { "*": { kind: "stall", afterBytes: 6 << 20, ms: 600_000, times: 1_000 } },
  });
  await using dir = await tempDir();
  const options = {
    config: { origin: slow.url, chunks: 3 },
    vars: { R2_PART_MIB: "5" },
    persistDir: `${dir.path}/state`,
  };
  const status = async (url: string) =>
    (await edgeJson(`${url}/_edge/status/team/cut.git`)).snapshot;
  const temporary = async (worker: Parameters<typeof listBucket>[0]) =>
    (await listBucket(worker, "repos/")).filter((k) => k.includes("/tmp/"));

  {
    await using first = await startWorkerEdge(options);
    const warm = fetch(`${first.url}/_edge/warm/team/cut.git`, { method: "POST" })
      .then((res) => res.body?.cancel(), () => {});
    for (let i = 0; (await temporary(first)).length === 0; i++) {
      assert(i < 1500, "a segment of the origin's pack reaches R2");
      await new Promise((r) => setTimeout(r, 20));
    }
    const during = await status(first.url);
    assertEquals(during.pending ?? null, null, "still inside the first invocation's fetch step");
    // A hard kill: no catch block inside the Worker gets to clean up.
    await first.kill();
    await warm;
  }
  slow.setFaults({});
  await using second = await startWorkerEdge(options);
  assert((await temporary(second)).length > 0, "the kill left the fetch step's segments behind");
  const before = await status(second.url);
  assert(before.state !== "ready", `nothing published: ${JSON.stringify(before)}`);
  assertEquals(before.pending ?? null, null, "no step was recorded, so none is carried on");

  const warm = await fetch(`${second.url}/_edge/warm/team/cut.git`, { method: "POST" });
  assertEquals(warm.status, 200, await warm.text());
  let after = await status(second.url);
  for (let i = 0; after.state !== "ready"; i++) {
    assert(i < 3000, `the new build publishes: ${JSON.stringify(after)}`);
    await new Promise((r) => setTimeout(r, 20));
    after = await status(second.url);
  }
  assertEquals(after.lastError, null);
  assertEquals(after.packs.length, 3);
  assertEquals(await temporary(second), [], "the killed build's segments were removed");
  const packKeys = (await listBucket(second, "repos/")).filter((k) => k.endsWith(".pack"));
  assertEquals(packKeys.length, 3, `only the published packs: ${packKeys.join(" ")}`);

  await assertClonesByUri(`${second.url}/team/cut.git`, repo.url, dir.path, 3);
});
