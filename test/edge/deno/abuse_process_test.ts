/**
 * Hostile traffic against `gitedge serve` as a process: what it costs in memory and whether it
 * survives. Loopback only, bounded in requests and time.
 */
import { startServeProcess } from "../../support/serve_process.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { git, tempDir } from "../../support/git.ts";
import { assert } from "../../support/assert.ts";

const MiB = 1 << 20;

/**
 * A chunked protocol-v2 fetch request of about `bytes` bytes of `want` lines, generated as it is
 * sent (the test never holds it).
 */
function wantFlood(bytes: number): ReadableStream<Uint8Array> {
  const line = new TextEncoder().encode(`0032want ${"a".repeat(40)}\n`);
  const block = new Uint8Array(1310 * line.length);
  for (let i = 0; i < block.length; i += line.length) block.set(line, i);
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode("0011command=fetch0001"));
    },
    pull(controller) {
      if (sent >= bytes) {
        controller.enqueue(new TextEncoder().encode("0000"));
        controller.close();
        return;
      }
      controller.enqueue(block.slice());
      sent += block.length;
    },
  });
}

/** Posts a flood; returns the status (or the error, when the edge drops the connection). */
async function postFlood(url: string, bytes: number): Promise<string> {
  try {
    const res = await fetch(`${url}/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
      },
      body: wantFlood(bytes),
      duplex: "half",
    } as RequestInit);
    await res.body?.cancel();
    return String(res.status);
  } catch (error) {
    return `dropped (${error instanceof Error ? error.message : error})`;
  }
}

Deno.test("serve: a 60 MB protocol-v2 request stays under 256 MiB, three under 320 MiB, and the edge still clones", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 8 });
  await using dir = await tempDir();
  await using edge = await startServeProcess([
    "--origin",
    origin.url,
    "--store",
    `${dir.path}/store`,
  ]);
  const repo = `${edge.url}/r.git`;
  // One 60 MB request of 1.2 million want lines: refused at the 16 MiB cap.
  const one = await postFlood(repo, 60_000_000);
  assert(one === "413", `one flood: ${one}`);
  const afterOne = await edge.peakRss();
  // Three at once: each refused at the cap or by the parse budget.
  const three = await Promise.all([1, 2, 3].map(() => postFlood(repo, 60_000_000)));
  assert(three.every((s) => s === "413" || s === "503"), `three floods: ${three}`);
  const peak = await edge.peakRss();
  console.log(
    `peak RSS after one 60 MB request ${afterOne / MiB | 0} MiB, after three more ${
      peak / MiB | 0
    } MiB`,
  );
  assert(afterOne <= 256 * MiB, `one flood took the edge to ${afterOne / MiB | 0} MiB`);
  // Three at once: the parse budget admits 1.5 caps; the rest is garbage not yet collected.
  assert(peak <= 320 * MiB, `three floods took the edge to ${peak / MiB | 0} MiB`);
  // The edge is alive and serves clones that equal direct ones.
  await git(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/direct`]);
  await git(["-c", "protocol.version=2", "clone", "-q", repo, `${dir.path}/edge`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
  assert(edge.alive(), `the edge exited: ${edge.stderr()}`);
});

Deno.test("serve: running out of file descriptors does not end the process; it serves again after", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 5 });
  await using dir = await tempDir();
  // A low descriptor limit for the server only, and more idle connections than it allows.
  await using edge = await startServeProcess(
    ["--origin", origin.url, "--store", `${dir.path}/store`],
    { ulimitNofile: 96 },
  );
  const { hostname, port } = new URL(edge.url);
  const idle: Deno.Conn[] = [];
  for (let i = 0; i < 160; i++) {
    try {
      idle.push(await Deno.connect({ hostname, port: Number(port) }));
    } catch {
      break; // refused or reset: the server is out of descriptors
    }
  }
  await new Promise((r) => setTimeout(r, 300));
  for (const c of idle) {
    try {
      c.close();
    } catch { /* already closed by the server */ }
  }
  // Bounded wait for it to listen again, then a clone that equals a direct one.
  let up = false;
  for (let i = 0; i < 100 && !up && edge.alive(); i++) {
    up = await fetch(`${edge.url}/_edge/metrics`).then(async (r) => {
      await r.body?.cancel();
      return r.ok;
    }, () => false);
    if (!up) await new Promise((r) => setTimeout(r, 100));
  }
  assert(edge.alive(), `the edge exited: ${edge.stderr()}`);
  assert(up, `the edge listens again: ${edge.stderr()}`);
  await git(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/direct`]);
  await git(["-c", "protocol.version=2", "clone", "-q", `${edge.url}/r.git`, `${dir.path}/edge`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
});
