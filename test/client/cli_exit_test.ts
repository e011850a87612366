/**
 * The client as users meet it, from real processes: `gitedge clone`'s exit codes 1 (other) and
 * 4 (verification), and `mod.ts`'s promise that the library never prints.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { runCloneCli } from "../support/cli_process.ts";
import { GIT_ENV, tempDir } from "../support/git.ts";
import { startOrigin } from "../support/origin.ts";
import { makeRepo } from "../support/fixtures.ts";
import { startDenoEdge } from "../../edge/deno/server.ts";
import { warm } from "../proxy/edge_suite.ts";
import { startRelay } from "../support/relay.ts";

const MOD = new URL("../../mod.ts", import.meta.url).href;

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

Deno.test("gitedge clone exits 1 for a non-empty destination and leaves it as it was", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 3 });
  await using dir = await tempDir();
  await Deno.mkdir(`${dir.path}/taken`);
  await Deno.writeTextFile(`${dir.path}/taken/keep.txt`, "mine\n");
  const run = await runCloneCli([origin.repoUrl("r.git"), "taken"], dir.path);
  assertEquals(run.code, 1, run.stderr);
  assertMatch(run.stderr, /already exists and is not empty/);
  assertEquals([...Deno.readDirSync(`${dir.path}/taken`)].map((e) => e.name), ["keep.txt"]);
  assertEquals(await Deno.readTextFile(`${dir.path}/taken/keep.txt`), "mine\n");
});

Deno.test("gitedge clone exits 4 when a pack by URI does not match its hash, and removes the clone", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 10, binaryBytes: 300_000 });
  await using dir = await tempDir();
  const store = `${dir.path}/store`;
  // Pack URIs lead through a relay that flips one byte of every pack it passes (size unchanged).
  // The edge itself never hands out a pack changed in its store, so only a change on the way can
  // reach the client, and only the client's check can catch it.
  let edgeUrl = "";
  await using relay = await startRelay(() => edgeUrl, {
    faults: { "*": { kind: "corrupt", atByte: 1000, times: 1000 } },
  });
  await using edge = await startDenoEdge({
    store,
    config: { origin: origin.url, chunks: 2, publicUrl: relay.url },
  });
  edgeUrl = edge.url;
  await warm(edge, "r.git");

  const run = await runCloneCli([`${edge.url}/r.git`, "out"], dir.path);
  assertEquals(run.code, 4, run.stderr);
  assert(!(await exists(`${dir.path}/out`)), "the failed clone's directory is removed");
});

Deno.test("mod.ts never prints: clone and fetchPackfiles succeed and fail in silence", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 10, binaryBytes: 300_000 });
  await using dir = await tempDir();
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url, chunks: 3 },
  });
  await warm(edge, "r.git");
  // A clone with packs by URI (fetchPackfiles inside), then failures of both entry points.
  const script = `
    import { clone, fetchPackfiles } from ${JSON.stringify(MOD)};
    const [url, base] = Deno.args;
    const summary = await clone({ url, directory: base + "/ok", jobs: 2 });
    if (summary.packs.length !== 3) throw new Error("expected 3 packs by URI");
    let failures = 0;
    await clone({ url: url + "-missing", directory: base + "/missing" }).catch(() => failures++);
    await fetchPackfiles([{ hash: "0".repeat(40), uri: url + "/nope.pack" }], {
      gitDir: base + "/ok/.git", retries: 1, backoffMs: 1,
    }).catch(() => failures++);
    if (failures !== 2) throw new Error("expected both calls to fail");
  `;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--ext=ts", script, `${edge.url}/r.git`, dir.path],
    env: GIT_ENV,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stdout = new TextDecoder().decode(out.stdout);
  const stderr = new TextDecoder().decode(out.stderr);
  assertEquals(out.code, 0, stderr);
  assertEquals(stdout, "", "nothing on stdout");
  assertEquals(stderr, "", "nothing on stderr");
});

Deno.test("gitedge clone shows the edge's message on an HTTP error, and a usage error in two lines", async () => {
  await using dir = await tempDir();
  // An edge whose origin is gone answers 502 with its own text/plain message.
  const gone = await startOrigin();
  const originUrl = gone.url;
  await gone.stop();
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: originUrl },
  });
  const run = await runCloneCli([`${edge.url}/r.git`, "out"], dir.path);
  assertEquals(run.code, 3, run.stderr);
  assertMatch(run.stderr, /HTTP 502 from \S+: gitedge: origin unreachable/);
  assert(!(await exists(`${dir.path}/out`)), "the failed clone's directory is removed");

  const usage = await runCloneCli(["--depth", "0", `${edge.url}/r.git`], dir.path);
  assertEquals(usage.code, 2, usage.stderr);
  assertEquals(
    usage.stderr,
    "gitedge clone: depth 0 is not a positive number\nsee 'gitedge clone --help'\n",
  );
});

Deno.test("gitedge clone --progress shows object counts from index-pack and ends with a summary", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 10, binaryBytes: 300_000 });
  await using dir = await tempDir();
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url, chunks: 2 },
  });
  await warm(edge, "r.git");
  const run = await runCloneCli(["--progress", `${edge.url}/r.git`, "out"], dir.path);
  assertEquals(run.code, 0, run.stderr);
  assert(run.stderr.startsWith("Cloning into 'out'...\n"), run.stderr);
  const objects = [...run.stderr.matchAll(/objects (\d+)\/(\d+)/g)];
  assert(objects.length > 0, run.stderr);
  const [, done, total] = objects.at(-1)!;
  assertEquals(done, total, "the last count has every object");
  const count = await new Deno.Command("git", {
    args: ["count-objects", "-v"],
    cwd: `${dir.path}/out`,
    env: GIT_ENV,
    stdout: "piped",
  }).output();
  const inPack = /in-pack: (\d+)/.exec(new TextDecoder().decode(count.stdout))![1];
  assertEquals(total, inPack, "objects counted across the packs");
  assertMatch(run.stderr, /\nReceived .*; 2 packs by URI .* into 'out'\.\n$/);
});
