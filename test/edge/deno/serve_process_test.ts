/**
 * `gitedge serve` as a real process, the way a user starts it: `--port 0` prints the URL it
 * listens on, it binds 127.0.0.1 unless told otherwise, `GITEDGE_ADMIN_TOKEN` guards the admin
 * routes, and SIGTERM stops it cleanly (exit 0).
 */
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { makeRepo } from "../../support/fixtures.ts";
import { GIT_ENV, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { tracedGit, URI_CLONE, urisFetched } from "../../proxy/edge_suite.ts";

const CLI = new URL("../../../edge/deno/cli.ts", import.meta.url).pathname;

/** Collects a child's stdout; `line(re)` resolves with the first line matching `re`. */
function watchLines(stream: ReadableStream<Uint8Array>) {
  let text = "";
  const waiters: { re: RegExp; resolve: (m: RegExpExecArray) => void }[] = [];
  const done = (async () => {
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      for (const w of [...waiters]) {
        const m = w.re.exec(text);
        if (m) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(m);
        }
      }
    }
  })();
  return {
    done,
    get text() {
      return text;
    },
    line(re: RegExp): Promise<RegExpExecArray> {
      const m = re.exec(text);
      if (m) return Promise.resolve(m);
      return new Promise((resolve) => waiters.push({ re, resolve }));
    },
  };
}

Deno.test("gitedge serve as a process: --port 0 prints a loopback URL, GITEDGE_ADMIN_TOKEN guards warm, SIGTERM exits 0", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 8, binaryBytes: 200_000 });
  await using dir = await tempDir();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      CLI,
      "serve",
      "--origin",
      origin.url,
      "--port",
      "0",
      "--store",
      `${dir.path}/store`,
    ],
    env: { ...GIT_ENV, GITEDGE_ADMIN_TOKEN: "tok-123" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stdout = watchLines(child.stdout);
  const stderr = new Response(child.stderr).text();
  let exited = false;
  try {
    const [, url, port] = await withinDeadline(
      stdout.line(/listening on (http:\/\/127\.0\.0\.1:(\d+)) /),
      "the listening line",
    );
    assert(Number(port) > 0, `a real port: ${port}`);

    const unauthorised = await fetch(`${url}/_edge/warm/r.git`, { method: "POST" });
    await unauthorised.body?.cancel();
    assertEquals(unauthorised.status, 401, "warm without the token from GITEDGE_ADMIN_TOKEN");
    const warmed = await fetch(`${url}/_edge/warm/r.git`, {
      method: "POST",
      headers: { authorization: "Bearer tok-123" },
    });
    const body = await warmed.json();
    assertEquals(warmed.status, 200, JSON.stringify(body));
    const trace = await tracedGit([...URI_CLONE, `${url}/r.git`, `${dir.path}/clone`]);
    assertEquals(urisFetched(trace).length, body.snapshot.packs.length, "packs by URI");

    child.kill("SIGTERM");
    const status = await child.status;
    exited = true;
    assertEquals(status.code, 0, `exit status; stderr: ${await stderr}`);
    await stdout.done;
    // Not a terminal: the log is JSON, a record per line, the listening one among them.
    const records = stdout.text.trim().split("\n").map((line) => JSON.parse(line));
    const listening = records.find((r) => r.event === "listening");
    assertMatch(listening?.message ?? "", /^listening on http:\/\/127\.0\.0\.1:\d+ \(store /);
  } finally {
    if (!exited) {
      child.kill("SIGKILL");
      await child.status;
    }
    await stdout.done.catch(() => {});
    await stderr;
  }
});
