/** `gitedge fetch` in an existing clone (a persistent CI workspace) equals `git fetch`. */
import { assertEquals } from "../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../support/git.ts";
import { startOrigin } from "../support/origin.ts";
import { addCommits, assertSameClone, makeRepo } from "../support/fixtures.ts";
import { startDenoEdge } from "../../edge/deno/server.ts";
import { warm } from "../proxy/edge_suite.ts";
import { runCloneCli } from "../support/cli_process.ts";

const CLI = new URL("../../edge/deno/cli.ts", import.meta.url).pathname;

Deno.test("gitedge fetch in a workspace after the origin moved equals git fetch", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 6 });
  await using dir = await tempDir();
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url, chunks: 2 },
  });
  await warm(edge, "r.git");
  const url = `${edge.url}/r.git`;
  for (const name of ["ours", "theirs"]) {
    const run = await runCloneCli(["-q", url, name], dir.path);
    assertEquals(run.code, 0, run.stderr);
  }
  await addCommits(origin, "r.git", { commits: 3, tag: "v9" });
  await addCommits(origin, "r.git", { commits: 2, branch: "feature-1" });

  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", CLI, "fetch", "-q"],
    cwd: `${dir.path}/ours`,
    env: GIT_ENV,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assertEquals(out.code, 0, new TextDecoder().decode(out.stderr));
  await git(["fetch", "-q"], { cwd: `${dir.path}/theirs` });
  const fetchHead = (name: string) => Deno.readTextFile(`${dir.path}/${name}/.git/FETCH_HEAD`);
  assertEquals(await fetchHead("ours"), await fetchHead("theirs"));
  await assertSameClone(`${dir.path}/ours`, `${dir.path}/theirs`);
  assertEquals(
    await git(["rev-parse", "refs/tags/v9", "refs/remotes/origin/feature-1"], {
      cwd: `${dir.path}/ours`,
    }),
    await git(["rev-parse", "refs/tags/v9", "refs/heads/feature-1"], {
      cwd: `${origin.root}/r.git`,
    }),
  );
});
