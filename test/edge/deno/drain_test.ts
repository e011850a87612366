/**
 * `gitedge serve`'s drain on SIGTERM (edge/deno/drain.ts), through a real process: a pack
 * download read slowly and a stock-git clone both complete across the signal, the process exits 0
 * and logs what it cut (nothing); a second signal exits at once.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { git, GIT_ENV, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { type ServeProcess, startServeProcess } from "../../support/serve_process.ts";
import { tracedGit, URI_CLONE, urisFetched, warm } from "../../proxy/edge_suite.ts";

/** The JSON records the process logged so far. */
function records(edge: ServeProcess): Record<string, unknown>[] {
  return edge.stdout().trim().split("\n").filter((l) => l.startsWith("{")).map((l) =>
    JSON.parse(l)
  );
}

/** Resolves once the process has logged a record `match` accepts (after its first `after`). */
async function logged(
  edge: ServeProcess,
  match: (r: Record<string, unknown>) => boolean,
  what: string,
  after = 0,
): Promise<Record<string, unknown>> {
  return await withinDeadline(
    (async () => {
      for (;;) {
        const found = records(edge).slice(after).find(match);
        if (found) return found;
        await new Promise((r) => setTimeout(r, 20));
      }
    })(),
    what,
  );
}

/** Starts the edge on a warm repository of a few MiB in `packs` packs; returns its pack URIs. */
async function warmEdge(dir: string, originUrl: string, packs: number, extra: string[] = []) {
  const edge = await startServeProcess([
    "--origin",
    originUrl,
    "--store",
    `${dir}/store`,
    "--chunks",
    String(packs),
    ...extra,
  ]);
  await warm(edge, "r.git");
  const trace = await tracedGit([...URI_CLONE, "--bare", `${edge.url}/r.git`, `${dir}/first.git`]);
  const uris = urisFetched(trace);
  assertEquals(uris.length, packs, "the clone got the snapshot's packs by URI");
  return { edge, uris };
}

/**
 * An origin with a repository of a few MiB and the edge warm on it in one pack (its URI from a
 * first clone): disposing it stops the edge, then removes the directory, then stops the origin.
 */
async function onePackEdge(extra: string[] = []) {
  await using stack = new AsyncDisposableStack();
  const origin = stack.use(await startOrigin());
  await makeRepo(origin, "r.git", { commits: 4, binaryBytes: 6 << 20 });
  const dir = stack.use(await tempDir());
  const { edge, uris } = await warmEdge(dir.path, origin.url, 1, extra);
  stack.use(edge);
  const owned = stack.move();
  return { edge, pack: uris[0], [Symbol.asyncDispose]: () => owned.disposeAsync() };
}

/** Reads `res`'s body slowly: `pauseMs` after each read. */
async function readSlowly(res: Response, pauseMs: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of res.body!) {
    parts.push(chunk);
    await new Promise((r) => setTimeout(r, pauseMs));
  }
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.byteLength) - p.byteLength);
  return out;
}

async function sha1Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-1", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("SIGTERM mid-download: the pack download, read slowly, completes whole; the edge then exits 0 having cut nothing", async () => {
  await using world = await onePackEdge();
  const { edge, pack } = world;
  const res = await fetch(pack.uri);
  assertEquals(res.status, 200);
  const length = Number(res.headers.get("content-length"));
  assert(length > 4 << 20, `a pack of several MiB: ${length}`);
  // The body is under way (the client has its first bytes) when the signal comes.
  const body = readSlowly(res, 25);
  await new Promise((r) => setTimeout(r, 100));
  const signalledAt = Date.now();
  Deno.kill(edge.pid, "SIGTERM");
  const bytes = await withinDeadline(body, "the download");
  const readMs = Date.now() - signalledAt;
  assertEquals(bytes.byteLength, length, "every byte of the pack");
  // A pack's last 20 bytes are the SHA-1 of the rest: the hash the URI names.
  assertEquals(await sha1Hex(bytes.subarray(0, length - 20)), pack.hash);
  assertEquals(
    Array.from(bytes.subarray(length - 20), (b) => b.toString(16).padStart(2, "0")).join(""),
    pack.hash,
  );
  assert(readMs > 500, `the download went on well past the signal (${readMs} ms)`);
  // The drain ends by itself (stop() would send a second signal: an abort, exit 1).
  assertEquals(await withinDeadline(edge.exited(), "the drain's own exit"), 0, edge.stderr());
  const finish = records(edge).find((r) => r.event === "drain.finish");
  assertEquals([finish?.cutConnections, finish?.cutRequests], [0, 0], JSON.stringify(finish));
  assert(!records(edge).some((r) => r.event === "drain.cut"), "nothing was cut");
});

Deno.test("SIGTERM mid-clone: a stock git clone fetching its packs by URI completes and equals a direct clone", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 12, binaryBytes: 3 << 20 });
  await using dir = await tempDir();
  const { edge } = await warmEdge(dir.path, origin.url, 4);
  await using _ = edge;
  const seen = records(edge).length;
  const clone = new Deno.Command("git", {
    args: [...URI_CLONE, "--bare", `${edge.url}/r.git`, `${dir.path}/clone.git`],
    env: GIT_ENV,
    stdout: "null",
    stderr: "piped",
  }).output();
  // The signal comes once the clone has its first pack: the others are still to be fetched,
  // each by a new connection.
  await logged(
    edge,
    (r) => r.event === "request" && r.route === "pack",
    "the clone's first pack download",
    seen,
  );
  Deno.kill(edge.pid, "SIGTERM");
  const out = await withinDeadline(clone, "the clone");
  assert(out.success, new TextDecoder().decode(out.stderr));
  await git(["clone", "-q", "--bare", `${origin.url}/r.git`, `${dir.path}/direct.git`]);
  await assertSameClone(`${dir.path}/clone.git`, `${dir.path}/direct.git`);
  // The drain ends by itself once the clone is done (stop() would send a second signal).
  assertEquals(await withinDeadline(edge.exited(), "the drain's own exit"), 0, edge.stderr());
  const all = records(edge);
  assert(!all.some((r) => r.event === "drain.cut"), "nothing was cut");
  const drainAt = all.findIndex((r) => r.event === "drain.start");
  assert(drainAt >= 0, "the drain started");
  const pending = all[drainAt].cloning as number;
  assert(pending >= 1 && pending <= 3, `its packs still to come: ${JSON.stringify(all[drainAt])}`);
  const packsAfter = all.slice(drainAt).filter((r) => r.event === "request" && r.route === "pack");
  assert(packsAfter.length >= 1, "packs were downloaded during the drain");
  assert(packsAfter.every((r) => r.status === 200), JSON.stringify(packsAfter));
});

Deno.test("a second signal exits at once, cutting the download in flight", async () => {
  await using world = await onePackEdge();
  const { edge, pack } = world;
  const res = await fetch(pack.uri);
  const reader = res.body!.getReader();
  await reader.read();
  Deno.kill(edge.pid, "SIGTERM");
  await logged(edge, (r) => r.event === "drain.start", "the drain");
  const second = Date.now();
  Deno.kill(edge.pid, "SIGTERM");
  const code = await withinDeadline(edge.stop(), "the exit");
  const tookMs = Date.now() - second;
  assertEquals(code, 1, edge.stderr());
  // The download, never read further, would hold the drain for its 30 s.
  assert(tookMs < 5000, `exited ${tookMs} ms after the second signal`);
  assert(records(edge).some((r) => r.event === "drain.abort"), "the abort is logged");
  await reader.cancel().catch(() => {});
});

Deno.test("past --drain-timeout the drain cuts what is left, logs it and exits 0", async () => {
  await using world = await onePackEdge(["--drain-timeout", "2"]);
  const { edge, pack } = world;
  const res = await fetch(pack.uri);
  const reader = res.body!.getReader();
  await reader.read(); // and never again: the download stalls
  const signalled = Date.now();
  Deno.kill(edge.pid, "SIGTERM");
  // Not stop(): a second signal reaching the edge after the first one aborts the drain (exit 1).
  assertEquals(await withinDeadline(edge.exited(), "the exit"), 0, edge.stderr());
  const tookMs = Date.now() - signalled;
  assert(tookMs >= 1900 && tookMs < 10_000, `the drain took ${tookMs} ms for a 2 s timeout`);
  const cut = records(edge).find((r) => r.event === "drain.cut");
  assert(cut && (cut.connections as number) >= 1, `the cut is logged: ${JSON.stringify(cut)}`);
  await reader.cancel().catch(() => {});
});
