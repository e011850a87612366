/**
 * `gitedge serve` as a supervisor runs it (docs/install.md): the installed package's `gitedge`, the
 * checkout's `deno run --config=edge/deno/serve.json …` recipe, and `deno task start`. Each is
 * started with its settings in the environment only (GITEDGE_ORIGIN, GITEDGE_PORT, GITEDGE_STORE)
 * and must listen on that port with that store, serve a clone, and on one SIGTERM to the process
 * the supervisor started drain and exit 0, leaving no process behind.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { docRecipe } from "../../support/doc_recipes.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { buildNpmPackage } from "../../../edge/npm/build.ts";
import { alive, descendants, killTree, stillRunning } from "../../support/process_tree.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Runs `cmd` as a supervisor would, checks port, store, a clone, then SIGTERM. */
async function superviseOnce(
  cmd: string[],
  originUrl: string,
  work: string,
  name: string,
): Promise<void> {
  const port = freePort();
  const store = `${work}/${name}-store`;
  const child = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    cwd: ROOT,
    env: {
      GITEDGE_ORIGIN: originUrl,
      GITEDGE_PORT: String(port),
      GITEDGE_STORE: store,
      GITEDGE_LOG_FORMAT: "json",
    },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "";
  let err = "";
  const outDone = child.stdout.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({ write: (t) => void (out += t) }),
  );
  const errDone = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({ write: (t) => void (err += t) }),
  );
  const status = child.status;
  let tree: number[] = [];
  try {
    await withinDeadline(
      (async () => {
        while (!/"event":"listening"/.test(out)) {
          if (!alive(child.pid)) throw new Error(`${name} exited: ${err}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      })(),
      `${name} listening`,
      120_000,
    );
    const listening = JSON.parse(out.split("\n").find((l) => l.includes('"listening"'))!);
    assertEquals(listening.url, `http://127.0.0.1:${port}`, `${name}: GITEDGE_PORT honoured`);
    assertEquals(listening.store, store, `${name}: GITEDGE_STORE honoured`);
    await git(["clone", "-q", `${listening.url}/r.git`, `${work}/${name}-clone`], {
      env: GIT_ENV,
    });
    await assertSameClone(`${work}/${name}-clone`, `${work}/direct`);
    assert((await Deno.stat(store)).isDirectory, `${name}: the store is where GITEDGE_STORE says`);
    tree = await descendants(child.pid);
    child.kill("SIGTERM");
    const code = (await withinDeadline(status, `${name} exits on SIGTERM`, 60_000)).code;
    await Promise.all([outDone, errDone]);
    assertEquals(code, 0, `${name} exit status\n${err}`);
    assert(/"event":"drain.finish"/.test(out), `${name} drained: ${out}`);
    // Give the kernel a moment to reap; then nothing of the tree may be left.
    assertEquals(await stillRunning(tree), [], `${name} left processes behind`);
  } finally {
    // On failure, end the whole tree (a launcher killed alone would orphan the server, which
    // holds the pipes open).
    killTree(new Set([child.pid, ...tree, ...await descendants(child.pid)]));
    await withinDeadline(
      Promise.allSettled([status, outDone, errDone]),
      `${name} ended`,
      30_000,
    ).catch(() => {});
  }
}

Deno.test("gitedge serve under a supervisor: environment honoured, SIGTERM drains and exits 0, no process left", async (t) => {
  await using work = await tempDir();
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 4, binaryBytes: 20_000 });
  await git(["clone", "-q", origin.repoUrl("r.git"), `${work.path}/direct`]);

  await t.step("the checkout's recipe: deno run --config=edge/deno/serve.json", async () => {
    const [line] = await docRecipe("docs/install.md", "serve-checkout");
    const words = line.split(/\s+/);
    assertEquals(words[0], "deno");
    await superviseOnce([Deno.execPath(), ...words.slice(1)], origin.url, work.path, "checkout");
  });

  await t.step("deno task start", async () => {
    await superviseOnce([Deno.execPath(), "task", "start"], origin.url, work.path, "task");
  });

  await t.step("the installed package's gitedge serve (Node launcher)", async () => {
    const { tarball } = await buildNpmPackage(`${work.path}/build`, true);
    const prefix = `${work.path}/prefix`;
    const npm = await new Deno.Command("npm", {
      args: [
        "install",
        "-g",
        "--prefix",
        prefix,
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        tarball!,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assertEquals(npm.code, 0, new TextDecoder().decode(npm.stderr));
    await superviseOnce([`${prefix}/bin/gitedge`, "serve"], origin.url, work.path, "package");
  });
});
