/**
 * The Deno server's connection limits (edge/deno/front.ts): a cap on open connections, a header
 * timeout, an idle timeout between requests, and no cut of a slow download that progresses.
 * Loopback only, small caps and short deadlines, each wait bounded.
 */
import { startDenoEdge } from "../../../edge/deno/server.ts";
import { parseServeArgs } from "../../../edge/deno/serve_cli.ts";
import { DEFAULT_CONNECTION_LIMITS } from "../../../src/proxy/settings/table.ts";
import { SettingError } from "../../../src/proxy/settings/resolve.ts";
import { startServeProcess } from "../../support/serve_process.ts";
import { startOrigin } from "../../support/origin.ts";
import { startRelay } from "../../support/relay.ts";
import { assertSameClone, makeRepo, refsOf } from "../../support/fixtures.ts";
import { withinDeadline } from "../../support/deadline.ts";
import { concat, encodePkts } from "../../../src/git/pktline.ts";
import { git, tempDir } from "../../support/git.ts";
import { assert, assertEquals, assertMatch, assertThrows } from "../../support/assert.ts";
import { Front } from "../../../edge/deno/front.ts";
import { Metrics } from "../../../src/proxy/core/metrics.ts";

const enc = new TextEncoder();

/** A connection whose reads run in the background: what arrived, and whether the peer closed. */
function watch(conn: Deno.Conn) {
  const state = { text: "", closed: false };
  const done = (async () => {
    const buf = new Uint8Array(16 << 10);
    try {
      for (;;) {
        const n = await conn.read(buf);
        if (n === null) break;
        state.text += new TextDecoder().decode(buf.subarray(0, n));
      }
    } catch { /* reset by the peer, or closed by the test */ }
    state.closed = true;
  })();
  return { state, done };
}

/** Polls `check` every 50 ms until it holds or `ms` pass; returns whether it held. */
async function waitFor(check: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; !check() && Date.now() < end;) {
    await new Promise((r) => setTimeout(r, 50));
  }
  return check();
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch { /* closed by the server */ }
}

/** A sample of `/_edge/metrics` (0 when absent). */
function sample(metrics: string, series: string): number {
  const line = metrics.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

async function metricsOf(url: string): Promise<string> {
  const res = await fetch(`${url}/_edge/metrics`);
  assertEquals(res.status, 200);
  return await res.text();
}

Deno.test("serve: more idle connections than --max-connections are answered 503 and closed; descriptors stay under the limit and the edge clones after", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 5 });
  await using dir = await tempDir();
  // 64 connections hold 192 descriptors in the server: under its limit of 320. 100 would not fit.
  await using edge = await startServeProcess(
    [
      "--origin",
      origin.url,
      "--store",
      `${dir.path}/store`,
      "--max-connections",
      "64",
      "--header-timeout",
      "600",
    ],
    { ulimitNofile: 320 },
  );
  const { hostname, port } = new URL(edge.url);
  const conns: Deno.Conn[] = [];
  const watched: ReturnType<typeof watch>[] = [];
  try {
    for (let i = 0; i < 100; i++) {
      const conn = await Deno.connect({ hostname, port: Number(port) });
      conns.push(conn);
      watched.push(watch(conn));
    }
    const refused = () => watched.filter((w) => w.state.text.startsWith("HTTP/1.1 503")).length;
    await waitFor(
      () => refused() >= 36 && watched.filter((w) => w.state.closed).length >= 36,
      20_000,
    );
    assertEquals(refused(), 36, "connections over the cap get a 503");
    assertEquals(watched.filter((w) => w.state.closed).length, 36, "the others stay open");
    assert(edge.alive(), `the edge exited: ${edge.stderr()}`);
  } finally {
    conns.forEach(closeQuietly);
    await Promise.all(watched.map((w) => w.done));
  }
  // Once the idle connections are gone, the edge answers again (a request that comes before
  // their closes have reached it is refused too, and counted).
  let metrics = "";
  let attempts = 0;
  for (; attempts < 100 && !metrics; attempts++) {
    const res = await fetch(`${edge.url}/_edge/metrics`).catch(() => null);
    const text = await res?.text().catch(() => "");
    if (res?.status === 200 && text) metrics = text;
    else await new Promise((r) => setTimeout(r, 100));
  }
  assert(metrics, "the edge answers again");
  const refusedForCap = sample(metrics, 'gitedge_connections_refused_total{reason="cap"}');
  assert(
    refusedForCap >= 36 && refusedForCap < 36 + attempts,
    `refused for the cap: ${refusedForCap} after ${attempts} attempts`,
  );
  assertEquals(sample(metrics, 'gitedge_connections_refused_total{reason="accept"}'), 0);
  assertMatch(metrics, /# TYPE gitedge_connections_open gauge\ngitedge_connections_open \d+\n/);
  await git(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/direct`]);
  await git(["-c", "protocol.version=2", "clone", "-q", `${edge.url}/r.git`, `${dir.path}/edge`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
  assert(edge.alive(), `the edge exited: ${edge.stderr()}`);
});

Deno.test("Deno server: a client sending its headers one byte a second is cut at the header timeout", async () => {
  await using dir = await tempDir();
  await using edge = await startDenoEdge({
    store: dir.path,
    config: { origin: "http://127.0.0.1:9/" },
    headerTimeoutSeconds: 2,
  });
  const { hostname, port } = new URL(edge.url);
  const conn = await Deno.connect({ hostname, port: Number(port) });
  const w = watch(conn);
  const request = `GET /_edge/metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ${"a".repeat(40)}\r\n\r\n`;
  let sent = 0;
  try {
    for (; sent < request.length && !w.state.closed; sent++) {
      await conn.write(enc.encode(request[sent]));
      await new Promise((r) => setTimeout(r, 1000));
    }
  } catch {
    /* the edge closed the connection */
  } finally {
    closeQuietly(conn);
    await w.done;
  }
  assert(sent < request.length, "the whole request went through, one byte a second");
  assertEquals(w.state.text, "", "no answer to a request cut short");
  const metrics = await metricsOf(edge.url);
  assertEquals(sample(metrics, 'gitedge_connections_timed_out_total{kind="header"}'), 1);
});

Deno.test("Deno server: a kept-alive connection with no request under way is closed after the idle timeout", async () => {
  await using dir = await tempDir();
  await using edge = await startDenoEdge({
    store: dir.path,
    config: { origin: "http://127.0.0.1:9/" },
    idleTimeoutSeconds: 2,
  });
  const { hostname, port } = new URL(edge.url);
  const conn = await Deno.connect({ hostname, port: Number(port) });
  const w = watch(conn);
  try {
    await conn.write(enc.encode("GET /_edge/metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
    // The answer comes, the connection stays open for more (keep-alive), then closes.
    assert(await waitFor(() => w.state.text.startsWith("HTTP/1.1 200"), 20_000), w.state.text);
    assert(await waitFor(() => w.state.closed, 30_000), "the idle connection stayed open");
  } finally {
    closeQuietly(conn);
    await w.done;
  }
  const metrics = await metricsOf(edge.url);
  assertEquals(sample(metrics, 'gitedge_connections_timed_out_total{kind="idle"}'), 1);
});

Deno.test("Deno server: a client that stops reading its answer is cut at the idle timeout (send)", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 4, binaryBytes: 12 << 20 });
  const tip = (await refsOf(`${origin.root}/r.git`))["refs/heads/main"];
  await using dir = await tempDir();
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url },
    idleTimeoutSeconds: 2,
  });
  // A whole-pack fetch (12 MB of incompressible blobs), far more than the sockets buffer.
  const body = encodePkts([
    "command=fetch\n",
    "delim",
    "no-progress\n",
    `want ${tip}\n`,
    "done\n",
    "flush",
  ]);
  const head = enc.encode(
    "POST /r.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nGit-Protocol: version=2\r\n" +
      "Content-Type: application/x-git-upload-pack-request\r\n" +
      `Content-Length: ${body.length}\r\n\r\n`,
  );
  const { hostname, port } = new URL(edge.url);
  const conn = await Deno.connect({ hostname, port: Number(port) });
  try {
    const request = concat([head, body]);
    for (let at = 0; at < request.length;) at += await conn.write(request.subarray(at));
    // Nothing is read: the edge's writes to this client stop being taken.
    let metrics = "";
    const cut = await withinDeadline(
      (async () => {
        for (;;) {
          metrics = await metricsOf(edge.url);
          if (sample(metrics, 'gitedge_connections_timed_out_total{kind="send"}') > 0) return true;
          await new Promise((r) => setTimeout(r, 250));
        }
      })(),
      "the send timeout",
    );
    assert(cut, metrics);
    assertEquals(sample(metrics, 'gitedge_connections_timed_out_total{kind="idle"}'), 0, "idle");
    // What the sockets held arrives, then the end: the connection was closed, short of the pack.
    const w = watch(conn);
    assert(await waitFor(() => w.state.closed, 30_000), "the stalled connection stayed open");
    await w.done;
    assert(w.state.text.startsWith("HTTP/1.1 200"), w.state.text.slice(0, 100));
    assert(w.state.text.length < 12 << 20, `cut short: ${w.state.text.length} bytes`);
  } finally {
    closeQuietly(conn);
  }
  await edge.idle();
});

Deno.test("Deno server: a slow pack download that progresses is not cut by a short idle or header timeout", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 4, binaryBytes: 12 << 20 });
  await using dir = await tempDir();
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url },
    idleTimeoutSeconds: 3,
    headerTimeoutSeconds: 3,
  });
  // The client takes the answer at 1.5 MB/s: a clone of about 8 s, through connections whose
  // deadlines are 3 s.
  await using slow = await startRelay(edge.url, { bytesPerSecond: 1_500_000 });
  await git(["clone", "-q", origin.repoUrl("r.git"), `${dir.path}/direct`]);
  await git(["-c", "protocol.version=2", "clone", "-q", `${slow.url}/r.git`, `${dir.path}/edge`]);
  await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);
  // (The relay's pooled connections may idle out between requests: that is the idle timeout.)
  const metrics = await metricsOf(edge.url);
  for (const kind of ["header", "send"]) {
    assertEquals(sample(metrics, `gitedge_connections_timed_out_total{kind="${kind}"}`), 0, kind);
  }
  await edge.idle();
});

Deno.test("serve flags: --max-connections, --header-timeout and --idle-timeout, their defaults and minimums", () => {
  const origin = ["--origin", "http://127.0.0.1:9"];
  const dflt = parseServeArgs(origin, () => undefined);
  assertEquals(
    [dflt.maxConnections, dflt.headerTimeoutSeconds, dflt.idleTimeoutSeconds],
    [
      DEFAULT_CONNECTION_LIMITS.maxConnections,
      DEFAULT_CONNECTION_LIMITS.headerTimeoutSeconds,
      DEFAULT_CONNECTION_LIMITS.idleTimeoutSeconds,
    ],
  );
  const set = parseServeArgs(
    [...origin, "--max-connections", "64", "--header-timeout=5", "--idle-timeout", "7"],
    () => undefined,
  );
  assertEquals([set.maxConnections, set.headerTimeoutSeconds, set.idleTimeoutSeconds], [64, 5, 7]);
  for (const flag of ["--max-connections", "--header-timeout", "--idle-timeout"]) {
    for (const bad of ["0", "-1", "x"]) {
      const e = assertThrows(
        () => parseServeArgs([...origin, flag, bad], () => undefined),
        SettingError,
      );
      assert(e.message.startsWith(flag), e.message);
    }
  }
});

Deno.test("front: a response whose body follows its headers is relayed at once, not held back for an acknowledgement (no Nagle stall)", async () => {
  await using dir = await tempDir();
  const file = `${dir.path}/body`;
  await Deno.writeFile(file, new Uint8Array(4096).fill(7));
  // Headers first, then a body read from a file as it is pulled: two writes, as the edge sends a
  // ranged pack read or a streamed upload-pack response.
  await using inner = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async () => {
    const f = await Deno.open(file);
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        const buf = new Uint8Array(1024);
        const n = await f.read(buf);
        if (n === null) {
          f.close();
          return c.close();
        }
        c.enqueue(buf.subarray(0, n));
      },
      cancel: () => f.close(),
    });
    return new Response(body, { headers: { "content-length": "4096" } });
  });
  const front = new Front({
    hostname: "127.0.0.1",
    port: 0,
    upstreamPort: inner.addr.port,
    maxConnections: 16,
    headerTimeoutMs: 10_000,
    idleTimeoutMs: 10_000,
    metrics: new Metrics(),
  });
  try {
    // One kept-alive connection per URL (fetch reuses it); each request waits for the one before.
    // Held back by Nagle's algorithm until the client's delayed ACK (40 ms on Linux), a request
    // through the front took 40-55 ms, in runs of them once the connection's quick ACKs were used
    // up (a quarter to three quarters of 30 requests); relayed at once, about 1 ms. Counted beside
    // the server answering directly, requests interleaved: a loaded machine slows both alike.
    const slow = { front: 0, direct: 0 };
    const timed = async (url: string) => {
      const t0 = performance.now();
      const res = await fetch(url);
      assertEquals((await res.bytes()).byteLength, 4096);
      return performance.now() - t0;
    };
    for (let i = 0; i < 60; i++) {
      if (await timed(`http://127.0.0.1:${inner.addr.port}/`) > 30) slow.direct++;
      if (await timed(`http://127.0.0.1:${front.addr.port}/`) > 30) slow.front++;
    }
    assert(
      slow.front <= slow.direct + 4,
      `requests over 30 ms of 60: ${slow.front} through the front, ${slow.direct} direct`,
    );
  } finally {
    await front.closeAll();
  }
});
