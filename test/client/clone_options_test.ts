/**
 * `gitedge clone` with the options CI checkouts use equals `git clone` with the same options, on
 * both git generations (the origin's git, the stock clone's git and the client's helper git are
 * each build's): refs, HEAD, `.git/shallow`, the repository's config (promisor, refspec, tagOpt,
 * `-c`), the objects, the index and work tree, submodules. The gitedge clone goes through a warm
 * edge (packs by URI for full clones, the edge's cached answer for the rest); the stock one goes
 * straight to the origin.
 */
import { assertEquals } from "../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../support/git.ts";
import { startOrigin } from "../support/origin.ts";
import { makeAwkwardRepo } from "../support/awkward.ts";
import { assertSameClone } from "../support/fixtures.ts";
import { type GitBuild, gitBuilds } from "../support/git_builds.ts";
import { startDenoEdge } from "../../edge/deno/server.ts";
import { warm } from "../proxy/edge_suite.ts";
import { type CliRun } from "../support/cli_process.ts";

const CLI = new URL("../../edge/deno/cli.ts", import.meta.url).pathname;

/** `gitedge clone ARGS` with `build`'s git first on PATH (index-pack, checkout, config...). */
async function gitedgeClone(build: GitBuild, args: string[], cwd: string): Promise<CliRun> {
  const binDir = build.bin.includes("/") ? build.bin.slice(0, build.bin.lastIndexOf("/")) : "";
  const path = binDir ? `${binDir}:${Deno.env.get("PATH")}` : Deno.env.get("PATH")!;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", CLI, "clone", ...args],
    cwd,
    env: { ...GIT_ENV, PATH: path },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { code: out.code, stdout: text.decode(out.stdout), stderr: text.decode(out.stderr) };
}

/** What a clone is, beyond `assertSameClone`: shallow, config, objects, index, submodules. */
async function describe(dir: string, base: string): Promise<Record<string, string>> {
  const run = (args: string[]) => git(args, { cwd: dir }).catch((e) => `(failed: ${e.message})`);
  const bare = !(await Deno.stat(`${dir}/.git`).then(() => true, () => false));
  const gitDir = bare ? dir : `${dir}/.git`;
  const file = (path: string) => Deno.readTextFile(`${gitDir}/${path}`).catch(() => "(none)");
  const packDir = `${gitDir}/objects/pack`;
  const promisors = (await Array.fromAsync(Deno.readDir(packDir)))
    .filter((e) => e.name.endsWith(".promisor")).length;
  return {
    refs: await run(["for-each-ref", "--format=%(objectname) %(refname)"]),
    head: await run(["rev-parse", "HEAD"]),
    symbolicHead: await run(["symbolic-ref", "-q", "HEAD"]),
    shallow: await file("shallow"),
    alternates: await file("objects/info/alternates"),
    // The remote's URL (and a submodule's, relative to it) differs only by its base.
    config: (await run(["config", "--local", "--list"])).replaceAll(base, "<base>"),
    // A partial clone's missing objects are not fetched to list them.
    objects: await git(["cat-file", "--batch-all-objects", "--batch-check"], {
      cwd: dir,
      env: { GIT_NO_LAZY_FETCH: "1" },
    }),
    index: await Deno.stat(`${gitDir}/index`).then(() => "present", () => "none"),
    promisorPacks: promisors > 0 ? "some" : "none",
    ...(bare ? {} : {
      files: await run(["ls-files", "-s"]),
      status: await run(["status", "--porcelain"]),
      submodules: await run(["submodule", "status", "--recursive"]),
    }),
  };
}

/** `GITEDGE_CLONE_CASES=<regexp>` runs only the matching cases (for work on one option). */
const onlySetting = Deno.env.get("GITEDGE_CLONE_CASES");
const only = onlySetting ? new RegExp(onlySetting) : null;

for (const build of (await gitBuilds()).builds) {
  Deno.test(`gitedge clone options equal git clone's (${build.label})`, async (t) => {
    await using dir = await tempDir();
    await using origin = await startOrigin({ gitBin: build.bin });
    const repo = await makeAwkwardRepo(origin, "app.git", `${dir.path}/scratch`);
    await using edge = await startDenoEdge({
      store: `${dir.path}/store`,
      config: { origin: origin.url, chunks: 2 },
    });
    await warm(edge, repo.name);
    const direct = origin.repoUrl(repo.name);
    const viaEdge = `${edge.url}/${repo.name}`;
    const sideTip = (await git(["rev-parse", repo.sideBranch], {
      cwd: `${origin.root}/${repo.name}`,
    })).trim();
    const olderMain = (await git(["rev-parse", "main~2"], {
      cwd: `${origin.root}/${repo.name}`,
    })).trim();
    const modern = build.version[0] > 2 || build.version[1] >= 49;
    // For --reference: a local repository with part of the history (one branch).
    await git(["clone", "-q", "--single-branch", "-b", repo.sideBranch, direct, "reference"], {
      cwd: dir.path,
      bin: build.bin,
    });

    const cases: { name: string; args: string[]; skip?: boolean }[] = [
      { name: "no option (packs by URI)", args: [] },
      { name: "--depth 1", args: ["--depth", "1"] },
      { name: "--depth 2 --no-single-branch", args: ["--depth=2", "--no-single-branch"] },
      { name: "--single-branch", args: ["--single-branch"] },
      { name: "--single-branch -b side", args: ["--single-branch", "-b", repo.sideBranch] },
      { name: "--single-branch -b a tag", args: ["--single-branch", "--branch", "v1.0"] },
      { name: "--no-tags", args: ["--no-tags"] },
      { name: "--depth 1 --no-tags", args: ["--depth", "1", "--no-tags"] },
      { name: "--no-checkout", args: ["--no-checkout"] },
      { name: "-n -b side", args: ["-n", "-b", repo.sideBranch] },
      { name: "-c", args: ["-c", "core.autocrlf=false", "-c", "x.y=1", "--config", "x.y=2"] },
      { name: "--filter=blob:none", args: ["--filter=blob:none"] },
      { name: "--filter blob:none --depth 1", args: ["--filter", "blob:none", "--depth", "1"] },
      { name: "--recurse-submodules", args: ["--recurse-submodules"] },
      { name: "--bare --depth 1", args: ["--bare", "--depth", "1"] },
      {
        name: "--bare --single-branch --no-tags",
        args: ["--bare", "--single-branch", "--no-tags"],
      },
      { name: "--reference", args: ["--reference", "reference"] },
      {
        name: "--revision of a branch",
        args: ["--revision", `refs/heads/${repo.sideBranch}`],
        skip: !modern,
      },
      { name: "--revision of a tag", args: ["--revision", "v1.0"], skip: !modern },
      { name: "--revision of an object id", args: ["--revision", sideTip], skip: !modern },
      {
        name: "--revision of a commit no ref points to",
        args: ["--revision", olderMain],
        skip: !modern,
      },
      { name: "--depth 1 -b side", args: ["--depth", "1", "-b", repo.sideBranch] },
      {
        name: "--revision --depth 1",
        args: ["--revision", sideTip, "--depth", "1"],
        skip: !modern,
      },
    ];
    let n = 0;
    for (const c of cases) {
      if (c.skip || (only && !only.test(c.name))) continue;
      await t.step(c.name, async () => {
        const ours = `ours-${n}`;
        const theirs = `theirs-${n++}`;
        const run = await gitedgeClone(build, ["-q", ...c.args, viaEdge, ours], dir.path);
        assertEquals(run.code, 0, run.stderr);
        assertEquals(run.stderr, "", "-q prints nothing");
        await git(["clone", "-q", ...c.args, direct, theirs], {
          cwd: dir.path,
          bin: build.bin,
        });
        const [a, b] = [`${dir.path}/${ours}`, `${dir.path}/${theirs}`];
        assertEquals(await describe(a, edge.url), await describe(b, origin.url));
        if (c.args.includes("--reference")) {
          // Only what the reference lacks came over: as many objects in the clone's own packs.
          const inPack = async (d: string) =>
            /in-pack: (\d+)/.exec(await git(["count-objects", "-v"], { cwd: d }))![1];
          assertEquals(await inPack(a), await inPack(b), "objects in the clone's own packs");
        }
        // A clone without checkout has an empty index: status lists every file as deleted.
        if (!c.args.some((a) => a === "-n" || a === "--no-checkout")) await assertSameClone(a, b);
        else await git(["fsck", "--full", "--no-progress"], { cwd: a });
      });
    }
    if (only) return;
    await t.step(
      "full clones get packs by URI, shallow ones the edge's cached answer",
      async () => {
        const full = await gitedgeClone(build, ["--json", "-q", viaEdge, "full-json"], dir.path);
        assertEquals(full.code, 0, full.stderr);
        assertEquals(JSON.parse(full.stdout).packs.length, 2, "the snapshot's two packs by URI");
        const hits = async () => {
          const text = await (await fetch(`${edge.url}/_edge/metrics`)).text();
          const line = text.split("\n").find((l) =>
            l.startsWith('gitedge_response_cache_total{result="hit"} ')
          );
          return Number(line?.split(" ")[1] ?? 0);
        };
        const before = await hits();
        // The same requests as the "--depth 1" and "--revision" cases above: answered from the cache.
        const again = [
          ["--depth", "1"],
          ...(modern ? [["--revision", sideTip, "--depth", "1"]] : []),
        ];
        for (const [i, args] of again.entries()) {
          const run = await gitedgeClone(build, ["-q", ...args, viaEdge, `again-${i}`], dir.path);
          assertEquals(run.code, 0, run.stderr);
        }
        assertEquals(await hits(), before + again.length);
      },
    );
  });
}
