/**
 * The npm package and the CI recipes as a runner meets them: the package built and `npm pack`ed
 * from this checkout, installed from the tarball into an empty directory; `gitedge clone` (packs
 * by URI) and `gitedge serve` run from that install; then the GitHub action's step and the GitLab
 * template's script run as those runners run them (their environment, working directory, inputs)
 * against a local edge. The install holds Deno and nothing of the server's test stack. The action's
 * default (no `package`, no `gitedge`) builds the client from its own checkout; its `package` takes
 * a tarball URL; the GitLab template needs GITEDGE_PACKAGE and says so without it.
 */
import { parse } from "yaml";
import { assert, assertEquals } from "../../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { startServeProcess } from "../../support/serve_process.ts";
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { startFileServer } from "../../support/relay.ts";
import { URI_CLONE, warm } from "../../proxy/edge_suite.ts";
import { buildNpmPackage } from "../../../edge/npm/build.ts";
import { VERSION } from "../../../src/version.ts";

const CI = new URL("../../../edge/ci/", import.meta.url).pathname;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(
  cmd: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<Run> {
  const out = await new Deno.Command(cmd, {
    args,
    cwd,
    env: { ...GIT_ENV, npm_config_update_notifier: "false", ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
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

/** Pack downloads the edge has served so far (`/_edge/metrics`). */
async function packsServed(edgeUrl: string): Promise<number> {
  const text = await (await fetch(`${edgeUrl}/_edge/metrics`)).text();
  return [...text.matchAll(/^gitedge_requests_total\{[^}]*route="pack"[^}]*\} (\d+)/gm)]
    .reduce((n, m) => n + Number(m[1]), 0);
}

/** `${{ a.b }}` expressions of a workflow value, looked up in `context` (missing: ""). */
function expand(value: string, context: Record<string, Record<string, string>>): string {
  return value.replace(/\$\{\{\s*(\w+)\.([\w-]+)\s*\}\}/g, (_, scope, key) => {
    return context[scope]?.[key] ?? "";
  });
}

interface ActionYaml {
  inputs: Record<string, { default?: string; required?: boolean }>;
  runs: {
    using: string;
    steps: {
      shell: string;
      run: string;
      env?: Record<string, string>;
      "working-directory"?: string;
    }[];
  };
}

/**
 * Runs the composite action's steps as GitHub's runner does: inputs are the given ones over the
 * defaults (defaults may refer to `github.*`), each step's `env` and `working-directory` are
 * expanded, `run` goes to bash with GITHUB_ACTION_PATH and GITHUB_WORKSPACE set.
 */
async function runAction(
  inputs: Record<string, string>,
  github: Record<string, string>,
  env: Record<string, string>,
): Promise<Run> {
  const action = parse(await Deno.readTextFile(`${CI}github/action.yml`)) as ActionYaml;
  assertEquals(action.runs.using, "composite");
  const resolved: Record<string, string> = {};
  for (const [name, spec] of Object.entries(action.inputs)) {
    const given = inputs[name] ?? expand(String(spec.default ?? ""), { github });
    if (spec.required) assert(given, `input ${name} is required`);
    resolved[name] = given;
  }
  for (const name of Object.keys(inputs)) assert(name in action.inputs, `no input ${name}`);
  const context = { github, inputs: resolved };
  let last: Run = { code: 0, stdout: "", stderr: "" };
  for (const step of action.runs.steps) {
    assertEquals(step.shell, "bash");
    const stepEnv = Object.fromEntries(
      Object.entries(step.env ?? {}).map(([k, v]) => [k, expand(String(v), context)]),
    );
    last = await run(
      "bash",
      ["-e", "-c", step.run],
      expand(step["working-directory"] ?? github.workspace, context),
      {
        ...env,
        ...stepEnv,
        GITHUB_ACTION_PATH: `${CI}github`,
        GITHUB_WORKSPACE: github.workspace,
      },
    );
    if (last.code !== 0) return last;
  }
  return last;
}

interface GitlabJob {
  variables: Record<string, string>;
  before_script: string[];
}

/** Runs the template's hidden job as GitLab's runner does: its variables and CI's, then its script. */
async function runGitlabTemplate(
  ciVariables: Record<string, string>,
  overrides: Record<string, string>,
): Promise<Run> {
  const template = parse(
    await Deno.readTextFile(`${CI}gitlab/gitedge.gitlab-ci.yml`),
  ) as Record<string, GitlabJob>;
  const job = template[".gitedge-checkout"];
  assertEquals(job.variables.GIT_STRATEGY, "none", "the runner's own clone is off");
  const script = ["set -eo pipefail", ...job.before_script].join("\n");
  return await run("bash", ["-c", script], ciVariables.CI_BUILDS_DIR, {
    ...job.variables,
    ...ciVariables,
    ...overrides,
  });
}

Deno.test("npm package and CI recipes: installed from the tarball, clone, serve, the GitHub action and the GitLab template", async (t) => {
  await using work = await tempDir();
  const { tarball } = await buildNpmPackage(`${work.path}/build`, true);
  assert(tarball, "npm pack wrote a tarball");
  const install = `${work.path}/install`;
  await Deno.mkdir(install);
  const npm = await run(
    "npm",
    ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball],
    install,
  );
  assertEquals(npm.code, 0, npm.stderr);
  const packages = await installedPackages(install);
  for (const server of ["miniflare", "workerd", "isomorphic-git", "hono", "sharp"]) {
    assert(!packages.some((p) => p.includes(server)), `${server} installed: ${packages}`);
  }
  assert(packages.includes("deno") && packages.includes("gitedge"), `${packages}`);
  const gitedge = `${install}/node_modules/.bin/gitedge`;
  const version = await run(gitedge, ["--version"], install);
  assertEquals(version.stdout.trim(), `gitedge version ${VERSION}`, version.stderr);
  // No recipe defaults to a package name the npm registry does not have.
  for (const recipe of ["github/action.yml", "gitlab/gitedge.gitlab-ci.yml"]) {
    const text = await Deno.readTextFile(`${CI}${recipe}`);
    assert(!/npx --yes gitedge@|default: gitedge@|GITEDGE_PACKAGE: gitedge@/.test(text), recipe);
  }

  await using origin = await startOrigin();
  await makeRepo(origin, "team/app.git", { commits: 12, binaryBytes: 200_000 });
  await git(["clone", "-q", origin.repoUrl("team/app.git"), "direct"], { cwd: work.path });
  const head = (await git(["rev-parse", "HEAD"], { cwd: `${work.path}/direct` })).trim();
  await using edge = await startDenoEdge({
    store: `${work.path}/store`,
    config: { allowHosts: [new URL(origin.url).host], multiOriginScheme: "http", chunks: 2 },
  });
  const edgeForOrigin = `${edge.url}/${new URL(origin.url).host}`;
  await warm(edge, `${new URL(origin.url).host}/team/app.git`);

  await t.step("gitedge clone from the install: packs by URI, the same clone", async () => {
    const clone = await run(
      gitedge,
      ["clone", "--json", `${edgeForOrigin}/team/app.git`, "c1"],
      work.path,
    );
    assertEquals(clone.code, 0, clone.stderr);
    const summary = JSON.parse(clone.stdout) as { packs: unknown[]; bytesByUri: number };
    assertEquals(summary.packs.length, 2, clone.stdout);
    assert(summary.bytesByUri > 0, clone.stdout);
    await assertSameClone(`${work.path}/c1`, `${work.path}/direct`);
  });

  await t.step("gitedge serve from the install, stock git through it", async () => {
    await using serve = await startServeProcess(
      ["--origin", origin.url, "--store", `${work.path}/store2`],
      { gitedge: [gitedge] },
    );
    await git([...URI_CLONE, `${serve.url}/team/app.git`, "c2"], { cwd: work.path });
    await assertSameClone(`${work.path}/c2`, `${work.path}/direct`);
    assertEquals(await serve.stop(), 0, serve.stderr());
  });

  await using files = await startFileServer({
    files: { [`/gitedge/${tarball.replace(/.*\//, "")}`]: tarball },
  });
  const tarballUrl = `${files.url}/gitedge/${tarball.replace(/.*\//, "")}`;

  const github = (workspace: string) => ({
    repository: "team/app",
    sha: head,
    server_url: origin.url,
    token: "",
    workspace,
  });

  await t.step("GitHub action, mode clone: full history by URI at the job's commit", async () => {
    const workspace = `${work.path}/gh-clone`;
    await Deno.mkdir(workspace);
    const before = await packsServed(edge.url);
    const out = await runAction(
      { edge: edgeForOrigin, "fetch-depth": "0", gitedge, path: "src" },
      github(workspace),
      {},
    );
    assertEquals(out.code, 0, out.stderr);
    assertEquals(await packsServed(edge.url) - before, 2, "both snapshot packs came by URI");
    assertEquals((await git(["rev-parse", "HEAD"], { cwd: `${workspace}/src` })).trim(), head);
    await git(["fsck", "--full", "--no-progress"], { cwd: `${workspace}/src` });
    assertEquals(
      await git(["ls-files", "-s"], { cwd: `${workspace}/src` }),
      await git(["ls-files", "-s"], { cwd: `${work.path}/direct` }),
    );
  });

  await t.step(
    "GitHub action, mode configure: the runner's stock git goes through the edge",
    async () => {
      const workspace = `${work.path}/gh-configure`;
      await Deno.mkdir(workspace);
      const gitConfig = `${work.path}/gh-gitconfig`;
      await Deno.writeTextFile(gitConfig, "");
      const out = await runAction(
        { edge: edgeForOrigin, mode: "configure", gitedge },
        github(workspace),
        { GIT_CONFIG_GLOBAL: gitConfig },
      );
      assertEquals(out.code, 0, out.stderr);
      const before = await packsServed(edge.url);
      await git(["clone", "-q", origin.repoUrl("team/app.git"), "app"], {
        cwd: workspace,
        env: { GIT_CONFIG_GLOBAL: gitConfig },
      });
      assertEquals(await packsServed(edge.url) - before, 2, "stock git took the packs by URI");
      await assertSameClone(`${workspace}/app`, `${work.path}/direct`);
    },
  );

  await t.step(
    "GitHub action, default inputs: the client built from the action's checkout, then the clone",
    async () => {
      const workspace = `${work.path}/gh-default`;
      const runnerTemp = `${work.path}/gh-default-temp`;
      await Deno.mkdir(workspace);
      await Deno.mkdir(runnerTemp);
      const out = await runAction({ edge: edgeForOrigin }, github(workspace), {
        RUNNER_TEMP: runnerTemp,
      });
      assertEquals(out.code, 0, out.stderr);
      assertEquals((await git(["rev-parse", "HEAD"], { cwd: workspace })).trim(), head);
      assertEquals((await Deno.readTextFile(`${workspace}/.git/shallow`)).trim(), head);
      const installed = await run(
        `${runnerTemp}/gitedge-client/bin/gitedge`,
        ["--version"],
        work.path,
      );
      assertEquals(installed.stdout.trim(), `gitedge version ${VERSION}`, installed.stderr);
    },
  );

  await t.step("GitHub action, package = a tarball URL: installed from it", async () => {
    const workspace = `${work.path}/gh-url`;
    const runnerTemp = `${work.path}/gh-url-temp`;
    await Deno.mkdir(workspace);
    await Deno.mkdir(runnerTemp);
    const out = await runAction(
      { edge: edgeForOrigin, package: tarballUrl, path: "src" },
      github(workspace),
      { RUNNER_TEMP: runnerTemp },
    );
    assertEquals(out.code, 0, out.stderr);
    assertEquals((await git(["rev-parse", "HEAD"], { cwd: `${workspace}/src` })).trim(), head);
    assert(files.stats.requests > 0, "npm downloaded the tarball from its URL");
    // Nothing was built: the tarball came from the URL.
    assertEquals(await exists(`${runnerTemp}/gitedge-client/build`), false);
  });

  await t.step("GitLab template without GITEDGE_PACKAGE: fails at once, saying so", async () => {
    const builds = `${work.path}/gl-none`;
    await Deno.mkdir(`${builds}/team/app`, { recursive: true });
    const out = await runGitlabTemplate({
      CI_BUILDS_DIR: builds,
      CI_PROJECT_DIR: `${builds}/team/app`,
      CI_PROJECT_PATH: "team/app",
      CI_COMMIT_SHA: head,
      CI_JOB_TOKEN: "job-token",
    }, { GITEDGE_EDGE: edgeForOrigin });
    assert(out.code !== 0, "the job fails");
    assert(out.stderr.includes("set GITEDGE_PACKAGE"), out.stderr);
  });

  await t.step(
    "GitLab template: the job's commit at depth 1 in the project directory",
    async () => {
      const builds = `${work.path}/gl`;
      const project = `${builds}/team/app`;
      await Deno.mkdir(project, { recursive: true });
      const out = await runGitlabTemplate({
        CI_BUILDS_DIR: builds,
        CI_PROJECT_DIR: project,
        CI_PROJECT_PATH: "team/app",
        CI_COMMIT_SHA: head,
        CI_JOB_TOKEN: "job-token",
      }, { GITEDGE_EDGE: edgeForOrigin, GITEDGE_PACKAGE: tarballUrl });
      assertEquals(out.code, 0, out.stderr);
      assertEquals((await git(["rev-parse", "HEAD"], { cwd: project })).trim(), head);
      assertEquals((await Deno.readTextFile(`${project}/.git/shallow`)).trim(), head);
      assertEquals(
        await git(["ls-files", "-s"], { cwd: project }),
        await git(["ls-files", "-s"], { cwd: `${work.path}/direct` }),
      );
    },
  );
});
