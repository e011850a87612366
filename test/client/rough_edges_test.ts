/**
 * What a newcomer tripped on (issue #34), each as a user meets it: `gitedge clone --filter` against
 * an origin without filters warns as git does and sets no promisor; `gitedge-checkout --help`
 * needs no GITEDGE_EDGE; a bad `gitedge serve` setting prints its one line and a hint, not the
 * whole usage; `gitedge clone --help` keeps one column for descriptions.
 */
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../support/git.ts";
import { startOrigin } from "../support/origin.ts";
import { assertSameClone, makeRepo } from "../support/fixtures.ts";
import { runCloneCli } from "../support/cli_process.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const CLI = `${ROOT}edge/deno/cli.ts`;

async function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(cmd, {
    args,
    cwd: ROOT,
    env: { ...GIT_ENV, ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const d = new TextDecoder();
  return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
}

Deno.test("gitedge clone --filter against an origin without filters: git's warning, a full clone, no promisor", async () => {
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 4, binaryBytes: 20_000 });
  await git(["config", "uploadpack.allowFilter", "false"], { cwd: `${origin.root}/r.git` });
  await git(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/direct`]);
  const out = await runCloneCli(["--filter", "blob:none", origin.repoUrl("r.git"), "c"], dir.path);
  assertEquals(out.code, 0, out.stderr);
  assertMatch(out.stderr, /^warning: filtering not recognized by server, ignoring$/m);
  const promisor = await new Deno.Command("git", {
    args: ["config", "--get", "remote.origin.promisor"],
    cwd: `${dir.path}/c`,
    stdout: "null",
    stderr: "null",
  }).output();
  assertEquals(promisor.code, 1, "no remote.origin.promisor");
  const packs = [...Deno.readDirSync(`${dir.path}/c/.git/objects/pack`)].map((e) => e.name);
  assert(!packs.some((n) => n.endsWith(".promisor")), `${packs}`);
  await assertSameClone(`${dir.path}/c`, `${dir.path}/direct`);
  await git(["fsck", "--full", "--no-progress"], { cwd: `${dir.path}/c` });
});

Deno.test("gitedge-checkout --help works without GITEDGE_EDGE", async () => {
  const out = await run("bash", [`${ROOT}edge/ci/checkout.sh`, "--help"], { GITEDGE_EDGE: "" });
  assertEquals(out.code, 0, out.stderr);
  assertMatch(out.stdout, /GITEDGE_EDGE\s+the edge's URL/);
  assert(!out.stdout.includes("set -euo"), out.stdout);
});

Deno.test("a bad gitedge serve setting: its one line and a hint, not the usage", async () => {
  for (
    const [args, env] of [
      [["--port", "abc"], {}],
      [[], { GITEDGE_PORT: "abc" }],
      [["--no-such-flag"], {}],
    ] as [string[], Record<string, string>][]
  ) {
    const out = await run(Deno.execPath(), ["run", "-A", CLI, "serve", ...args], env);
    assertEquals(out.code, 2, out.stderr);
    const lines = out.stderr.trimEnd().split("\n");
    assertEquals(lines.length, 2, out.stderr);
    assertMatch(lines[0], /^gitedge serve: /);
    assertEquals(lines[1], "see 'gitedge serve --help'");
  }
});

Deno.test("gitedge clone --help: every option's description starts in the same column", async () => {
  const out = await run(Deno.execPath(), ["run", "-A", CLI, "clone", "--help"]);
  assertEquals(out.code, 0, out.stderr);
  const options = out.stdout.split("\n\n").find((p) => p.startsWith("options"))!;
  const columns = new Set<number>();
  for (const line of options.split("\n").slice(1)) {
    const m = /^( {2}-\S.*?  +)\S/.exec(line);
    if (m) columns.add(m[1].length);
    else if (/^ +\S/.test(line) && !/^ {2}-/.test(line)) columns.add(/^ +/.exec(line)![0].length);
  }
  assertEquals([...columns], [24], options);
});
