/**
 * `ls-refs` sent ahead (src/proxy/origin/ls_refs_ahead.ts) against what an outside red team did
 * (issue #35 cases 5, 9, 14; #30's "used by its request or not sent"): a request one caller wrote
 * never goes to the origin under another's credential; a credential the origin refuses sends
 * nothing ahead; an answer sent ahead that is not a well-formed listing costs the client nothing;
 * anonymous requests to repositories the origin does not serve hold nothing.
 */
import { assert, assertEquals } from "../../support/assert.ts";
import { git, tempDir } from "../../support/git.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { encodePkts } from "../../../src/git/pktline.ts";
import { LsRefsAhead, MAX_LEARNED_REQUEST_BYTES } from "../../../src/proxy/origin/ls_refs_ahead.ts";
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { createApp } from "../../../src/proxy/app.ts";
import { DEFAULT_EDGE_CONFIG } from "../../../src/proxy/core/config.ts";
import { serveLoopback } from "../../support/http_server.ts";

const REPO = "r.git";

interface Seen {
  path: string;
  authorization: string | null;
  bytes: number;
  ahead: boolean;
  command: string | null;
  status: number;
}

/**
 * A recording proxy in front of the origin: every request's credential, body size and command,
 * and whether it is the edge's own (`agent=gitedge`); `truncateAhead` cuts the answers to those.
 */
function recorder(origin: string) {
  const seen: Seen[] = [];
  const state = { truncateAhead: false };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    const body = req.body ? new Uint8Array(await req.arrayBuffer()) : null;
    const text = body ? new TextDecoder().decode(body.subarray(0, 4096)) : "";
    const ahead = text.includes("agent=gitedge");
    const res = await fetch(`${origin}${url.pathname}${url.search}`, {
      method: req.method,
      headers: req.headers,
      body: body as Uint8Array<ArrayBuffer> | null,
    });
    seen.push({
      path: url.pathname,
      authorization: req.headers.get("authorization"),
      bytes: body?.byteLength ?? 0,
      ahead,
      command: /command=([a-z-]+)/.exec(text)?.[1] ?? null,
      status: res.status,
    });
    if (ahead && state.truncateAhead && res.status === 200) {
      const bytes = new Uint8Array(await res.arrayBuffer());
      return new Response(bytes.subarray(0, Math.floor(bytes.byteLength / 2)), res);
    }
    return new Response(res.body, res);
  });
  const addr = server.addr as Deno.NetAddr;
  return {
    url: `http://127.0.0.1:${addr.port}`,
    seen,
    state,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

const basic = (user: string, password: string) => `Basic ${btoa(`${user}:${password}`)}`;

function lsRefsBody(prefixes: number): Uint8Array<ArrayBuffer> {
  return encodePkts([
    "command=ls-refs\n",
    "agent=git/2.39.5\n",
    "delim",
    "peel\n",
    "symrefs\n",
    ...Array.from({ length: prefixes }, (_, i) => `ref-prefix refs/x/${i}\n`),
    "flush",
  ]) as Uint8Array<ArrayBuffer>;
}

Deno.test("ls-refs ahead: no caller's request goes to the origin under another's credential; a refused credential sends nothing ahead", async () => {
  // Fails on the request learned per User-Agent: the anonymous 2,000-prefix ls-refs was sent
  // ahead with alice's credential, and each wrong password's info/refs cost the origin 2 401s.
  await using dir = await tempDir();
  await using origin = await startOrigin({ requireAuth: { user: "alice", password: "pw1" } });
  await makeRepo(origin, REPO, { commits: 3, branches: 0, tags: 1, binaryBytes: 4096 });
  await using rec = await recorder(origin.url);
  await using edge = await denoEdgeFactory({ origin: rec.url });
  const gitUa = `git/${(await git(["version"])).trim().split(" ")[2]}`;
  const big = lsRefsBody(2000);
  const anonymous = await fetch(`${edge.url}/${REPO}/git-upload-pack`, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
      "user-agent": gitUa,
    },
    body: big,
  });
  await anonymous.body?.cancel();
  assertEquals(anonymous.status, 401);
  const alice = `http://alice:pw1@${edge.url.replace("http://", "")}/${REPO}`;
  for (let i = 0; i < 3; i++) {
    await git(["clone", "-q", alice, `${dir.path}/c${i}`]);
    await new Promise((r) => setTimeout(r, 600)); // past the "sent with its info/refs" window
  }
  const aliceAuth = basic("alice", "pw1");
  const foreign = rec.seen.filter((s) =>
    s.authorization === aliceAuth && s.bytes >= big.byteLength
  );
  assertEquals(foreign, [], "nothing the anonymous caller wrote went out with alice's credential");
  assert(
    rec.seen.some((s) => s.ahead && s.authorization === aliceAuth && s.status === 200),
    "alice's own ls-refs was sent ahead for her later clones",
  );
  await git([
    "clone",
    "-q",
    `http://alice:pw1@${origin.url.replace("http://", "")}/${REPO}`,
    `${dir.path}/d`,
  ]);
  await assertSameClone(`${dir.path}/d`, `${dir.path}/c2`);

  // Ten wrong passwords: ten info/refs refused, nothing sent ahead for any.
  rec.seen.length = 0;
  for (let i = 0; i < 10; i++) {
    const res = await fetch(`${edge.url}/${REPO}/info/refs?service=git-upload-pack`, {
      headers: {
        "git-protocol": "version=2",
        "user-agent": gitUa,
        authorization: basic("alice", `bad${i}`),
      },
    });
    await res.body?.cancel();
    assertEquals(res.status, 401);
  }
  await new Promise((r) => setTimeout(r, 200)); // anything sent ahead has reached the origin
  assertEquals(rec.seen.filter((s) => s.status === 401).length, 10, JSON.stringify(rec.seen));
});

Deno.test("ls-refs ahead: an answer sent ahead that is cut short is not relayed; the clone's own ls-refs goes to the origin", async () => {
  // Fails when the answer sent ahead is relayed unchecked: git says "expected flush after ref
  // listing" on every clone while the origin only ever truncated the edge's own ls-refs.
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await makeRepo(origin, REPO, { commits: 3, branches: 0, tags: 1, binaryBytes: 4096 });
  await using rec = await recorder(origin.url);
  await using edge = await denoEdgeFactory({ origin: rec.url });
  rec.state.truncateAhead = true;
  for (let i = 0; i < 4; i++) {
    await git(["clone", "-q", `${edge.url}/${REPO}`, `${dir.path}/c${i}`]);
    await new Promise((r) => setTimeout(r, 600));
  }
  assert(rec.seen.some((s) => s.ahead), "an ls-refs was sent ahead (and cut short)");
  await git(["clone", "-q", `${origin.url}/${REPO}`, `${dir.path}/d`]);
  for (let i = 0; i < 4; i++) await assertSameClone(`${dir.path}/d`, `${dir.path}/c${i}`);
});

Deno.test("ls-refs ahead: clones and fetches in turn cost the origin at most one ls-refs sent in vain", async () => {
  // #30: a fetch asks other prefixes than a clone: the request learned from one was sent ahead
  // for the other, and the origin answered both, every time (5 of 6 in vain here). Fails
  // without the "used or not sent" rule.
  await using dir = await tempDir();
  await using origin = await startOrigin();
  await makeRepo(origin, REPO, { commits: 3, branches: 0, tags: 1, binaryBytes: 4096 });
  await using rec = await recorder(origin.url);
  await using edge = await denoEdgeFactory({ origin: rec.url });
  const pause = () => new Promise((r) => setTimeout(r, 600)); // past the "sent with" window
  await git(["clone", "-q", `${edge.url}/${REPO}`, `${dir.path}/c`]);
  await pause();
  rec.seen.length = 0;
  for (let i = 0; i < 3; i++) {
    await git(["-C", `${dir.path}/c`, "fetch", "-q", "origin"]);
    await pause();
    await git(["clone", "-q", `${edge.url}/${REPO}`, `${dir.path}/c${i}`]);
    await pause();
  }
  const lsRefs = rec.seen.filter((s) => s.command === "ls-refs");
  // 6 listings: 6 ls-refs, plus at most one sent ahead in vain (the first fetch's, predicted
  // from the clone before it).
  assert(lsRefs.length <= 7, JSON.stringify(lsRefs));
});

Deno.test("ls-refs ahead: anonymous ls-refs to repositories the origin does not serve are not kept; learned requests are bounded in bytes", async () => {
  // Fails on the request learned per User-Agent before the origin's answer: 10 posts of 2 MB
  // with distinct User-Agents held about 20 MB until restart.
  await using origin = await startOrigin();
  await using dir = await tempDir();
  const ahead = new LsRefsAhead();
  const app = createApp({
    store: new FsPackStore(dir.path),
    coordinator: {
      manifest: () => Promise.resolve(null),
      status: () => Promise.reject(new Error("not used")),
      schedule: () => Promise.resolve(),
      warm: () => Promise.reject(new Error("not used")),
    },
    originFetch: (req) => fetch(req),
    clock: { now: () => Date.now() },
    signingKey: crypto.getRandomValues(new Uint8Array(32)),
    config: { ...DEFAULT_EDGE_CONFIG, origin: origin.url, maxRequestBytes: 4 << 20 },
    waitUntil: (p) => void p.catch(() => {}),
  }, { lsRefsAhead: ahead });
  const edge = serveLoopback((req) => app.fetch(req));
  try {
    const body = lsRefsBody(72_000); // about 2 MB
    assert(body.byteLength > 1_950_000, `${body.byteLength}`);
    for (let i = 0; i < 10; i++) {
      const res = await fetch(`${edge.url}/none-${i}.git/git-upload-pack`, {
        method: "POST",
        headers: {
          "git-protocol": "version=2",
          "content-type": "application/x-git-upload-pack-request",
          "user-agent": `ua-${i}`,
        },
        body,
      });
      await res.body?.cancel();
      assert(res.status >= 400, `${res.status}`);
    }
    // Small ones alike (a clone's own size), to a repository that does not exist.
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${edge.url}/none-small.git/git-upload-pack`, {
        method: "POST",
        headers: {
          "git-protocol": "version=2",
          "content-type": "application/x-git-upload-pack-request",
          "user-agent": `small-${i}`,
        },
        body: lsRefsBody(3),
      });
      await res.body?.cancel();
      assert(res.status >= 400, `${res.status}`);
    }
    assertEquals(ahead.heldBytes(), 0, "nothing held for callers the origin did not serve");
    // A repository the origin serves: large requests are answered but not learned; a clone's is.
    await makeRepo(origin, REPO, { commits: 2, branches: 0, tags: 0, binaryBytes: 1024 });
    const post = async (body: Uint8Array<ArrayBuffer>, ua: string) => {
      const res = await fetch(`${edge.url}/${REPO}/git-upload-pack`, {
        method: "POST",
        headers: {
          "git-protocol": "version=2",
          "content-type": "application/x-git-upload-pack-request",
          "user-agent": ua,
        },
        body,
      });
      await res.body?.cancel();
      assertEquals(res.status, 200);
    };
    await post(body, "big");
    await post(lsRefsBody(6000), "bigger than a clone's"); // ~190 KB: over the bound of one
    assertEquals(ahead.heldBytes(), 0, "a request over the bound is not kept");
    await post(lsRefsBody(3), "small");
    const held = ahead.heldBytes();
    assert(held > 0 && held <= MAX_LEARNED_REQUEST_BYTES, `${held}`);
  } finally {
    await edge.stop();
  }
});

Deno.test("ls-refs ahead: a burst of clones of one credential costs the origin no more ls-refs than going direct", async () => {
  // #30: each info/refs of a burst sent its own ls-refs ahead and dropped the one before it
  // unused (10 sent, 9 in vain). Fails without follow-ups (one sent when the one under way is
  // answered, for every clone that came meanwhile).
  await using origin = await startOrigin();
  const { bare } = await makeRepo(origin, REPO, { commits: 3, branches: 0, tags: 0 });
  await using rec = await recorder(origin.url);
  await using edge = await denoEdgeFactory({ origin: rec.url });
  const headers = { "git-protocol": "version=2", "user-agent": "test/burst" };
  const infoRefs = async () => {
    const res = await fetch(`${edge.url}/${REPO}/info/refs?service=git-upload-pack`, { headers });
    assertEquals(res.status, 200);
    await res.body?.cancel();
  };
  const lsRefs = async () => {
    const res = await fetch(`${edge.url}/${REPO}/git-upload-pack`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/x-git-upload-pack-request" },
      body: lsRefsBody(0),
    });
    assertEquals(res.status, 200);
    return await res.text();
  };
  await infoRefs();
  await lsRefs(); // learns the request
  await new Promise((r) => setTimeout(r, 600)); // past the "sent with its info/refs" window
  const head = (await git(["rev-parse", "HEAD"], { cwd: bare })).trim();
  await git(["update-ref", "refs/heads/before-all", head], { cwd: bare });
  rec.seen.length = 0;
  const N = 10;
  await Promise.all(Array.from({ length: N }, () => infoRefs()));
  const listings = await Promise.all(Array.from({ length: N }, () => lsRefs()));
  for (const l of listings) assert(l.includes("refs/heads/before-all"), l);
  const lsRefsSeen = rec.seen.filter((s) => s.command === "ls-refs");
  assert(lsRefsSeen.length <= N, `${lsRefsSeen.length} ls-refs for ${N} clones`);
  // Sent ahead: the first and a follow-up for the clones that came meanwhile (2 here; a loaded
  // machine may answer the first before all info/refs came, hence the margin), where one per
  // clone was sent before, all but the last in vain.
  const sentAhead = lsRefsSeen.filter((s) => s.ahead).length;
  assert(sentAhead <= N / 2, `${sentAhead} sent ahead for ${N} clones`);
});
