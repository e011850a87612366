/**
 * docs/install.md's client recipes run as written: the build, `npm install -g` of the tarball by
 * path and by URL, and `npx --package` of it, then `gitedge clone` against a local edge. Only the
 * page's example names are replaced: `dist/npm` by a temporary directory, the example hosts by the
 * local edge and file server; `npm install -g` goes to a temporary prefix (npm_config_prefix).
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { startFileServer } from "../../support/relay.ts";
import { docRecipe } from "../../support/doc_recipes.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { warm } from "../../proxy/edge_suite.ts";
import { VERSION } from "../../../src/version.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const PAGE = "docs/install.md";

Deno.test("docs/install.md: build, install by path and by URL, npx --package, each clones through the edge", async (t) => {
  await using work = await tempDir();
  await using origin = await startOrigin();
  await makeRepo(origin, "team/app.git", { commits: 6, binaryBytes: 50_000 });
  await using edge = await startDenoEdge({
    store: `${work.path}/store`,
    config: { origin: origin.url, chunks: 2 },
  });
  await warm(edge, "team/app.git");
  await git(["clone", "-q", origin.repoUrl("team/app.git"), `${work.path}/direct`]);
  const dist = `${work.path}/dist`;
  const tarballName = `gitedge-${VERSION}.tgz`;
  await using files = await startFileServer({
    files: { [`/gitedge/${tarballName}`]: `${dist}/${tarballName}` },
  });
  const prefix = `${work.path}/prefix`;
  const env = {
    ...GIT_ENV,
    npm_config_prefix: prefix,
    npm_config_update_notifier: "false",
    npm_config_fund: "false",
    npm_config_audit: "false",
    PATH: `${prefix}/bin:${Deno.env.get("PATH")}`,
  };
  const local = (line: string) =>
    line.replaceAll("./dist/npm", dist).replaceAll("dist/npm", dist)
      .replaceAll("https://git-edge.example.com", edge.url)
      .replaceAll("https://downloads.example.com", files.url)
      .replaceAll(" app", ` ${work.path}/app`);
  const runRecipe = async (name: string) => {
    const lines = await docRecipe(PAGE, name);
    const script = ["set -euo pipefail", ...lines.map(local)].join("\n");
    const out = await new Deno.Command("bash", {
      args: ["-c", script],
      cwd: ROOT,
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const d = new TextDecoder();
    const result = { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
    assertEquals(result.code, 0, `${name}: ${lines.join("; ")}\n${result.stderr}`);
    return result;
  };

  await t.step("the page names this checkout's version", async () => {
    const text = await Deno.readTextFile(`${ROOT}${PAGE}`);
    for (const m of text.matchAll(/gitedge-(\d+\.\d+\.\d+)\.tgz|gitedge@(\d+\.\d+\.\d+)/g)) {
      assertEquals(m[1] ?? m[2], VERSION, m[0]);
    }
  });

  await t.step("build: the tarball where the page says", async () => {
    const out = await runRecipe("build");
    assertEquals(out.stdout.trim(), `${dist}/${tarballName}`);
  });

  await t.step("install by path, then gitedge clone", async () => {
    await runRecipe("install-path");
    await assertSameClone(`${work.path}/app`, `${work.path}/direct`);
  });

  await t.step("install by URL", async () => {
    await Deno.remove(prefix, { recursive: true });
    const out = await runRecipe("install-url");
    assertEquals(out.stdout.trim().split("\n").at(-1), `gitedge version ${VERSION}`);
    assert(files.stats.requests > 0, "npm fetched the tarball from its URL");
  });

  await t.step("npx --package, then gitedge clone", async () => {
    await runRecipe("npx");
    await assertSameClone(`${work.path}/app2`, `${work.path}/direct`);
  });
});
