/**
 * `deno task start` as the README documents it: the task's own permission flags (read from
 * deno.json) run `gitedge serve` with every flag, `--pack-indexes on` included, which runs git.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { startServeProcess } from "../../support/serve_process.ts";
import { URI_CLONE, warm } from "../../proxy/edge_suite.ts";

/** The `deno run` permission flags of deno.json's `start` task, and the script it runs. */
export async function startTask(): Promise<{ permissions: string[]; script: string }> {
  const config = JSON.parse(
    await Deno.readTextFile(new URL("../../../deno.json", import.meta.url)),
  );
  const words = String(config.tasks.start).split(/\s+/);
  assertEquals(words.slice(0, 2), ["deno", "run"], "the start task is a deno run");
  const at = words.findIndex((w, i) => i >= 2 && !w.startsWith("--"));
  return { permissions: words.slice(2, at), script: words[at] };
}

Deno.test("deno task start's permissions run gitedge serve with --pack-indexes on: a warm builds the indexes, a clone equals the origin's", async () => {
  const { permissions, script } = await startTask();
  assertEquals(script, "edge/deno/cli.ts", "the CLI serve_process starts");
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 6, binaryBytes: 50_000 });
  await using dir = await tempDir();
  await using edge = await startServeProcess(
    ["--origin", origin.url, "--store", `${dir.path}/store`, "--pack-indexes", "on"],
    { permissions },
  );
  const snapshot = await warm(edge, "r.git");
  assertEquals([snapshot.state, snapshot.lastError], ["ready", null], JSON.stringify(snapshot));
  const packs = snapshot.packs as unknown[];
  assert(packs.length > 0, "the snapshot has packs");
  let indexes = 0;
  for await (const e of Deno.readDir(`${dir.path}/store/repos`)) {
    for await (const f of Deno.readDir(`${dir.path}/store/repos/${e.name}/packs`)) {
      if (f.name.endsWith(".idx")) indexes++;
    }
  }
  assertEquals(indexes, packs.length, "an index per pack, built by git");
  await git([...URI_CLONE, "--bare", `${edge.url}/r.git`, `${dir.path}/via-edge.git`]);
  await git(["clone", "-q", "--bare", `${origin.url}/r.git`, `${dir.path}/direct.git`]);
  await assertSameClone(`${dir.path}/via-edge.git`, `${dir.path}/direct.git`);
  assertEquals(await edge.stop(), 0, edge.stderr());
  assert(!/NotCapable/.test(edge.stderr()), edge.stderr());
});
