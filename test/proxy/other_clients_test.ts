/**
 * Git clients other than stock git clone and fetch through the edge (a warm Deno edge, an
 * http-backend origin) and must end up exactly as their own direct runs: isomorphic-git (npm), and
 * from Debian's packages dulwich, libgit2 (pygit2) and JGit where they are installed (`.ci/run`
 * installs them; a client that is missing or does not start is skipped, saying why).
 */
import git from "isomorphic-git";
import isoHttp from "isomorphic-git/http/node";
import fs from "node:fs";
import { tempDir } from "../support/git.ts";
import { skipped } from "../support/skips.ts";
import { startOrigin } from "../support/origin.ts";
import { addCommits, assertSameClone, assertSameObjects, makeRepo } from "../support/fixtures.ts";
import { denoEdgeFactory } from "../support/edge.ts";
import { warm } from "./edge_suite.ts";

/** Clone `url` into `dir`, or fetch into the clone at `dir`. */
interface Client {
  name: string;
  clone(url: string, dir: string): Promise<void>;
  fetch(dir: string): Promise<void>;
}

const PYTHON = "/usr/bin/python3";

/**
 * Debian 12's `jgit` script leaves its LFS and Apache HTTP jars off the class path (it dies with
 * `NoClassDefFoundError: org/eclipse/jgit/lfs/BuiltinLFS`); its `JGIT_CLASSPATH` adds them.
 */
const JGIT_CLASSPATH = [
  "httpclient.jar",
  "httpcore.jar",
  "org.eclipse.jgit.http.apache.jar",
  "org.eclipse.jgit.lfs.jar",
].map((jar) => `/usr/share/java/${jar}`).join(":");

async function run(cmd: string, args: string[]): Promise<{ ok: boolean; out: string }> {
  try {
    const env = cmd === "jgit" ? { JGIT_CLASSPATH } : undefined;
    const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" })
      .output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    return { ok: out.success, out: text };
  } catch (e) {
    return { ok: false, out: String(e) };
  }
}

async function mustRun(cmd: string, args: string[]): Promise<void> {
  const { ok, out } = await run(cmd, args);
  if (!ok) throw new Error(`${cmd} ${args.slice(0, 2).join(" ")} failed: ${out.slice(-1500)}`);
}

const python = (code: string) => (...args: string[]) => mustRun(PYTHON, ["-c", code, ...args]);

const isomorphicGit: Client = {
  name: "isomorphic-git",
  clone: async (url, dir) => {
    await git.clone({ fs, http: isoHttp, dir, url });
  },
  fetch: async (dir) => {
    await git.fetch({ fs, http: isoHttp, dir, tags: true });
  },
};

const dulwich: Client = {
  name: "dulwich",
  clone: (url, dir) =>
    python("import sys; from dulwich import porcelain; porcelain.clone(sys.argv[1], sys.argv[2])")(
      url,
      dir,
    ),
  fetch: (dir) =>
    python("import sys; from dulwich import porcelain; porcelain.fetch(sys.argv[1], 'origin')")(
      dir,
    ),
};

const pygit2: Client = {
  name: "libgit2 (pygit2)",
  clone: (url, dir) =>
    python("import sys, pygit2; pygit2.clone_repository(sys.argv[1], sys.argv[2])")(url, dir),
  fetch: (dir) =>
    python("import sys, pygit2; pygit2.Repository(sys.argv[1]).remotes['origin'].fetch()")(dir),
};

const jgit: Client = {
  name: "JGit",
  clone: (url, dir) => mustRun("jgit", ["clone", url, dir]),
  fetch: (dir) => mustRun("jgit", ["--git-dir", `${dir}/.git`, "fetch", "origin"]),
};

/** Why `client` cannot run here, or null when it can. */
async function unavailable(client: Client): Promise<string | null> {
  if (client === isomorphicGit) return null;
  if (client === jgit) {
    const { ok, out } = await run("jgit", ["version"]);
    return ok ? null : `jgit does not run here: ${out.split("\n")[0].slice(0, 200)}`;
  }
  const module = client === dulwich ? "dulwich" : "pygit2";
  const { ok, out } = await run(PYTHON, ["-c", `import ${module}`]);
  return ok ? null : `${PYTHON} cannot import ${module}: ${out.trim().split("\n").at(-1)}`;
}

for (const client of [isomorphicGit, dulwich, pygit2, jgit]) {
  const why = await unavailable(client);
  if (why) skipped(`other clients: ${client.name}`, why);
  Deno.test({
    name: `${client.name} clones and fetches through the edge as it does from the origin`,
    ignore: why !== null,
    fn: async () => {
      await using dir = await tempDir();
      for (const side of ["direct", "edge"] as const) {
        // Each side gets its own origin repository, moved identically (fixtures are deterministic).
        await using origin = await startOrigin();
        await using edge = await denoEdgeFactory({ origin: origin.url });
        await makeRepo(origin, "r.git", {
          commits: 12,
          branches: 2,
          tags: 2,
          binaryBytes: 200_000,
        });
        await warm(edge, "r.git");
        const url = side === "direct" ? origin.repoUrl("r.git") : `${edge.url}/r.git`;
        await client.clone(url, `${dir.path}/${side}`);
        await addCommits(origin, "r.git", { commits: 2, tag: "moved" });
        await client.fetch(`${dir.path}/${side}`);
        await edge.stop();
      }
      await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
      await assertSameObjects(`${dir.path}/direct`, `${dir.path}/edge`);
    },
  });
}
