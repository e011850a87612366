/**
 * `deno task worker:dev` under a supervisor (issue #34): one SIGTERM to the task's process ends
 * wrangler and its workerd processes too; nothing of the tree is left (it used to leave wrangler
 * and workerd running: npx, between the task and wrangler, died on the signal alone).
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { tempDir } from "../../support/git.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { descendants, killTree, stillRunning } from "../../support/process_tree.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;

Deno.test("deno task worker:dev: SIGTERM to the task ends wrangler and workerd, no process left", async () => {
  await using dir = await tempDir("gitedge-worker-dev-");
  const toml = await Deno.readTextFile(`${ROOT}wrangler.toml`);
  await Deno.writeTextFile(
    `${dir.path}/wrangler.toml`,
    toml.replace(/^main = .*$/m, `main = ${JSON.stringify(`${ROOT}edge/cloudflare/worker.ts`)}`),
  );
  await Deno.writeTextFile(`${dir.path}/.dev.vars`, `EDGE_SIGNING_KEY=${"ab".repeat(32)}\n`);
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "task",
      "worker:dev",
      "-c",
      `${dir.path}/wrangler.toml`,
      "--ip",
      "127.0.0.1",
      "--port",
      "0",
      "--persist-to",
      `${dir.path}/state`,
      "--show-interactive-dev-session=false",
      "--var",
      "ORIGIN:http://127.0.0.1:9",
    ],
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    env: { WRANGLER_SEND_METRICS: "false", NO_COLOR: "1", FORCE_COLOR: "0" },
  }).spawn();
  let out = "";
  const pump = (s: ReadableStream<Uint8Array>) =>
    s.pipeThrough(new TextDecoderStream()).pipeTo(
      new WritableStream({ write: (t) => void (out += t) }),
    ).catch(() => {});
  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
  let tree: number[] = [];
  try {
    await withinDeadline(
      (async () => {
        while (!/Ready on http/.test(out)) await new Promise((r) => setTimeout(r, 200));
      })(),
      "wrangler dev ready",
      180_000,
    );
    tree = await descendants(child.pid);
    assert(tree.length >= 2, `wrangler and workerd run under the task: ${tree}`);
    child.kill("SIGTERM");
    await withinDeadline(child.status, "the task exits on SIGTERM", 30_000);
    assertEquals(await stillRunning(tree, 10_000), [], `left running\n${out.slice(-2000)}`);
  } finally {
    killTree(new Set([child.pid, ...tree, ...await descendants(child.pid)]));
    await withinDeadline(Promise.all([child.status, pumps]), "cleanup", 30_000).catch(() => {});
  }
});
