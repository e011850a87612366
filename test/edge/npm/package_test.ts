/**
 * The npm package as a CI runner meets it: built and `npm pack`ed from this checkout, installed
 * from the tarball into an empty directory, then `gitedge clone` (packs by URI) and `gitedge
 * serve` run from that install. Its dependency tree holds Deno and nothing of the server's tests.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { startServeProcess } from "../../support/serve_process.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { URI_CLONE, warm } from "../../proxy/edge_suite.ts";
import { buildNpmPackage } from "../../../edge/npm/build.ts";

async function run(
  cmd: string,
  args: string[],
  cwd: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(cmd, {
    args,
    cwd,
    env: { ...GIT_ENV, npm_config_update_notifier: "false" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return {
    code: out.code,
    stdout: d.decode(out.stdout),
    stderr: d.decode(out.stderr),
  };
}

/** Every package name under `node_modules` (scoped ones as `@scope/name`). */
async function installedPackages(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(`${dir}/node_modules`)) {
    if (e.name.startsWith(".")) continue;
    if (!e.name.startsWith("@")) names.push(e.name);
    else {for await (const s of Deno.readDir(`${dir}/node_modules/${e.name}`)) {
        names.push(`${e.name}/${s.name}`);
      }}
  }
  return names.sort();
}

Deno.test("npm package: installed from its tarball, `gitedge clone` and `gitedge serve` work", async () => {
  await using work = await tempDir();
  const { tarball } = await buildNpmPackage(`${work.path}/build`, true);
  assert(tarball, "npm pack wrote a tarball");
  const install = `${work.path}/install`;
  await Deno.mkdir(install);
  const npm = await run(
    "npm",
    [
      "install",
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
      tarball,
    ],
    install,
  );
  assertEquals(npm.code, 0, npm.stderr);
  const packages = await installedPackages(install);
  for (
    const server of ["miniflare", "workerd", "isomorphic-git", "hono", "sharp"]
  ) {
    assert(
      !packages.some((p) => p.includes(server)),
      `${server} installed: ${packages}`,
    );
  }
  assert(
    packages.includes("deno") && packages.includes("gitedge"),
    `${packages}`,
  );
  const gitedge = `${install}/node_modules/.bin/gitedge`;

  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 12, binaryBytes: 200_000 });
  await git(["clone", "-q", origin.repoUrl("r.git"), "direct"], {
    cwd: work.path,
  });

  // A clone through an edge, packs by URI.
  await using edge = await startDenoEdge({
    store: `${work.path}/store`,
    config: { origin: origin.url, chunks: 2 },
  });
  await warm(edge, "r.git");
  const clone = await run(gitedge, [
    "clone",
    "--json",
    `${edge.url}/r.git`,
    "c1",
  ], work.path);
  assertEquals(clone.code, 0, clone.stderr);
  const summary = JSON.parse(clone.stdout) as {
    packs: unknown[];
    bytesByUri: number;
  };
  assertEquals(summary.packs.length, 2, clone.stdout);
  assert(summary.bytesByUri > 0, clone.stdout);
  await assertSameClone(`${work.path}/c1`, `${work.path}/direct`);

  // `gitedge serve` from the same install, then stock git through it.
  await using serve = await startServeProcess(
    ["--origin", origin.url, "--store", `${work.path}/store2`],
    { gitedge: [gitedge] },
  );
  await git([...URI_CLONE, `${serve.url}/r.git`, "c2"], { cwd: work.path });
  await assertSameClone(`${work.path}/c2`, `${work.path}/direct`);
  assertEquals(await serve.stop(), 0, serve.stderr());
});
