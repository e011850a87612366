/**
 * Hostile traffic and faults, end to end, for every runtime: registered once per runtime like
 * `edge_suite.ts` (`abuseSuite(denoEdgeFactory, "deno")`, `abuseSuite(workerEdgeFactory, "worker")`).
 * Loopback only; every loop is bounded.
 */
import { git, GitCommandError, tempDir } from "../support/git.ts";
import { type Origin, type OriginOptions, startOrigin } from "../support/origin.ts";
import { assertSameClone, makeRepo, refsOf } from "../support/fixtures.ts";
import { tracedGit, URI_CLONE, urisFetched } from "./edge_suite.ts";
import { repoId } from "../../src/proxy/core/repo.ts";
import { encodePkts } from "../../src/git/pktline.ts";
import type { EdgeFactory, EdgeUnderTest, EdgeUnderTestOptions } from "../support/edge.ts";
import { serveLoopback } from "../support/http_server.ts";
import { assert, assertEquals, assertMatch } from "../support/assert.ts";
import { type Fault, startRelay } from "../support/relay.ts";

interface World {
  origin: Origin;
  edge: EdgeUnderTest;
  dir: string;
}

/** A protocol-v2 upload-pack POST of `body` with extra headers. */
async function postUploadPack(
  repoUrl: string,
  body: Uint8Array,
  headers: Record<string, string> = {},
): Promise<Response> {
  return await fetch(`${repoUrl}/git-upload-pack`, {
    method: "POST",
    headers: {
      "git-protocol": "version=2",
      "content-type": "application/x-git-upload-pack-request",
      ...headers,
    },
    body: body as Uint8Array<ArrayBuffer>,
  });
}

/** Fails when `text` names an absolute filesystem path (e.g. `/tmp/...` or `/home/...`). */
export function assertNoServerPath(text: string, what: string): void {
  const m = /(^|[\s'"`(=])\/(tmp|home|root|var|usr|etc|work|proc|opt|srv|mnt)\b[^\s'"]*/.exec(
    text,
  );
  assert(m === null, `${what} names a server path (${m?.[0]}): ${text}`);
}

export function abuseSuite(
  factory: EdgeFactory,
  runtime: string,
  testOptions: Pick<Deno.TestDefinition, "sanitizeOps" | "sanitizeResources"> = {},
): void {
  const t = (
    name: string,
    fn: (w: World) => Promise<void>,
    opts: {
      originOptions?: OriginOptions;
      edge?: (origin: Origin) => Partial<EdgeUnderTestOptions>;
    } = {},
  ) =>
    Deno.test({
      name: `[${runtime}] ${name}`,
      ...testOptions,
      fn: async () => {
        await using origin = await startOrigin(opts.originOptions);
        await using edge = await factory({ origin: origin.url, chunks: 2, ...opts.edge?.(origin) });
        await using dir = await tempDir();
        await fn({ origin, edge, dir: dir.path });
      },
    });

  t(
    "a corrupt gzip body is a 400; status and warm of a private repository need the origin's yes",
    async (w) => {
      await makeRepo(w.origin, "p.git", { commits: 4 });
      const basic = `Basic ${btoa("alice:s3cret")}`;
      // Not gzip at all, and gzip cut short: both are the client's fault.
      const real = await new Response(
        new Blob([new TextEncoder().encode("0014command=ls-refs\n0000")]).stream()
          .pipeThrough(new CompressionStream("gzip")),
      ).bytes();
      for (const body of [new TextEncoder().encode("this is not gzip"), real.subarray(0, 12)]) {
        const res = await postUploadPack(`${w.edge.url}/p.git`, body, {
          "content-encoding": "gzip",
          authorization: basic,
        });
        const text = await res.text();
        assertEquals(res.status, 400, `corrupt gzip: ${text}`);
        assert(text.startsWith("gitedge: request body is not valid gzip"), text);
        assertNoServerPath(text, "400 body");
      }
      // Status and warm without credentials: refused, with the origin's status.
      for (const [method, route] of [["GET", "status"], ["POST", "warm"]]) {
        const res = await fetch(`${w.edge.url}/_edge/${route}/p.git`, { method });
        const text = await res.text();
        assertEquals(res.status, 401, `${route} without credentials: ${text}`);
        assert(!/tips|packs/.test(text), `${route} tells nothing: ${text}`);
      }
      const wrong = await fetch(`${w.edge.url}/_edge/status/p.git`, {
        headers: { authorization: `Basic ${btoa("alice:wrong")}` },
      });
      assertEquals(wrong.status, 401, "status with wrong credentials");
      await wrong.body?.cancel();
      // With credentials the origin accepts, both work.
      const warm = await fetch(`${w.edge.url}/_edge/warm/p.git`, {
        method: "POST",
        headers: { authorization: basic },
      });
      const warmed = await warm.json();
      assertEquals(warm.status, 200, `warm with credentials: ${JSON.stringify(warmed)}`);
      assertEquals(warmed.snapshot.state, "ready", "warmed");
      const st = await fetch(`${w.edge.url}/_edge/status/p.git`, {
        headers: { "x-origin-authorization": basic },
      });
      assertEquals(st.status, 200, "status with credentials");
      assertEquals((await st.json()).snapshot.tips, warmed.snapshot.tips, "tips to the reader");
    },
    { originOptions: { requireAuth: { user: "alice", password: "s3cret" } } },
  );

  t("origin redirects are never followed, to another host or at all", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 3 });
    // An unlisted host the edge must never reach, and an origin that redirects there.
    let elsewhereHits = 0;
    const elsewhere = serveLoopback(() => {
      elsewhereHits++;
      return new Response("SECRET-FROM-ANOTHER-HOST\n");
    });
    const redirector = serveLoopback((req) => {
      const url = new URL(req.url);
      return new Response(null, {
        status: 302,
        headers: { location: `${elsewhere.url}${url.pathname}${url.search}` },
      });
    });
    try {
      await using edge = await factory({ origin: redirector.url, chunks: 2 });
      const res = await fetch(`${edge.url}/r.git/info/refs?service=git-upload-pack`, {
        headers: { "git-protocol": "version=2" },
      });
      const text = await res.text();
      assertEquals(res.status, 502, `a redirect is a 502: ${text}`);
      assert(/redirect/.test(text) && !text.includes("SECRET"), text);
      // Neither the origin's address nor the path it was asked (error bodies carry no URL).
      const hidden = [new URL(redirector.url).host, new URL(elsewhere.url).host, "/r.git/info"];
      const noUrl = (body: string) => assert(!hidden.some((h) => body.includes(h)), body);
      noUrl(text);
      const err = await git(["clone", "-q", `${edge.url}/r.git`, `${w.dir}/c`]).then(
        () => "cloned",
        (e: GitCommandError) => e.stderr,
      );
      assert(/502/.test(err), `git reports the refusal: ${err}`);
      for (const [method, route] of [["GET", "status"], ["POST", "warm"]]) {
        const r = await fetch(`${edge.url}/_edge/${route}/r.git`, { method });
        const body = await r.text();
        assertEquals(r.status, 502, `${route} behind a redirecting origin: ${body}`);
        assert(!body.includes("SECRET"), body);
        noUrl(body);
      }
      const post = await postUploadPack(
        `${edge.url}/r.git`,
        new TextEncoder().encode("0014command=ls-refs\n0000"),
      );
      assertEquals(post.status, 502, "upload-pack behind a redirecting origin");
      const postText = await post.text();
      assert(!postText.includes("SECRET"), "no relayed body");
      noUrl(postText);
      assertEquals(elsewhereHits, 0, "the other host was never contacted");
    } finally {
      await redirector.stop();
      await elsewhere.stop();
    }
  });

  t("a request body that does not arrive in time is a 408, and the edge goes on", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 3 });
    // The start of a request, then nothing: the body timeout (1 s here) ends it.
    let upload: ReadableStreamDefaultController<Uint8Array> | undefined;
    const stalled = new ReadableStream<Uint8Array>({
      start(controller) {
        upload = controller;
        controller.enqueue(new TextEncoder().encode("0011command=fetch0001"));
      },
    });
    const client = new AbortController();
    try {
      const res = await fetch(`${w.edge.url}/r.git/git-upload-pack`, {
        method: "POST",
        headers: {
          "git-protocol": "version=2",
          "content-type": "application/x-git-upload-pack-request",
        },
        body: stalled,
        duplex: "half",
        signal: client.signal,
      } as RequestInit);
      const text = await res.text();
      assertEquals(res.status, 408, `stalled body: ${text}`);
      assert(text.includes("not received within 1 s"), text);
    } finally {
      // End the upload that would never finish, so the connection closes.
      upload?.error(new Error("test over"));
      client.abort();
    }
    await git(["clone", "-q", `${w.edge.url}/r.git`, `${w.dir}/c`]);
    await git(["fsck", "--full"], { cwd: `${w.dir}/c` });
  }, { edge: () => ({ bodyTimeoutSeconds: 1 }) });

  t("a stored pack with a byte flipped is never handed out; the snapshot heals", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 12, binaryBytes: 300_000 });
    const first = await warmed(w.edge, "r.git");
    await git(["clone", "-q", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
    // One byte in the middle of a snapshot pack, flipped in place: same size.
    const key = (await w.edge.listStored("repos/")).find((k) => k.endsWith(".pack"));
    assert(key, "a stored pack");
    const bytes = await w.edge.readStored(key);
    bytes[bytes.length >> 1] ^= 0xff;
    await w.edge.writeStored(key, bytes);
    // The next URI clone gets no URIs (so it does not fail) and starts a rebuild.
    const trace = await tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/a`]);
    assertEquals(urisFetched(trace).length, 0, "no URIs while a pack is damaged");
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/a`);
    const healed = await settled(w.edge, "r.git", (st) => st.builds === 2);
    assertEquals(healed.state, "ready", `rebuilt: ${JSON.stringify(healed)}`);
    void first;
    const again = await tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/b`]);
    assertEquals(urisFetched(again).length, (healed.packs as unknown[]).length, "URIs again");
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/b`);
  });

  t(
    "a damaged stored manifest is a missing one: clones pass through, a build replaces it",
    async (w) => {
      await makeRepo(w.origin, "r.git", { commits: 8, binaryBytes: 200_000 });
      await git(["clone", "-q", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
      // Before the edge ever looked at the repository: a truncated manifest in the store.
      const id = repoId(`${w.origin.url}/r.git`);
      await w.edge.writeStored(
        `repos/${id}/manifest.json`,
        new TextEncoder().encode('{"version":1,"la'),
      );
      const trace = await tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/a`]);
      assertEquals(urisFetched(trace).length, 0, "no URIs from a damaged manifest");
      await assertSameClone(`${w.dir}/direct`, `${w.dir}/a`);
      const built = await settled(w.edge, "r.git", (st) => st.builds === 1);
      assertEquals(built.state, "ready", `built: ${JSON.stringify(built)}`);
      const again = await tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/b`]);
      assertEquals(urisFetched(again).length, (built.packs as unknown[]).length, "URIs after");
      await assertSameClone(`${w.dir}/direct`, `${w.dir}/b`);
    },
  );

  t(
    "an origin that breaks off or sends garbage is a 502 saying what it did, naming no URL",
    async (w) => {
      const { bare } = await makeRepo(w.origin, "r.git", { commits: 6, binaryBytes: 200_000 });
      const main = (await refsOf(bare))["refs/heads/main"];
      await using relay = await startRelay(w.origin.url);
      await using edge = await factory({ origin: relay.url, chunks: 2 });
      const hosts = [new URL(relay.url).host, new URL(w.origin.url).host];
      const noUrl = (text: string, what: string) => {
        assert(!hosts.some((h) => text.includes(h)), `${what} names the origin: ${text}`);
        assert(!/https?:\/\//.test(text), `${what} carries a URL: ${text}`);
        assertNoServerPath(text, what);
      };
      const upload = "/r.git/git-upload-pack";
      const adv = "/r.git/info/refs";
      // Warm asks info/refs twice (the caller's read access, then the build), then POSTs ls-refs
      // and fetch: `pass` lets the earlier requests through.
      const cases: [string, Record<string, Fault[]>, RegExp][] = [
        [
          "a connection reset mid-pack",
          { [upload]: [pass(), { kind: "truncate", afterBytes: 60_000, times: 1 }] },
          /^gitedge: origin's answer to git-upload-pack was cut short: /,
        ],
        [
          "garbage instead of pkt-lines",
          { [upload]: [{ kind: "body", body: "zzzz this is no pkt-line\n", times: 1 }] },
          /^gitedge: origin's answer to git-upload-pack is malformed: .*pkt-line length/,
        ],
        [
          "a 200 KB pkt-line header",
          { [adv]: [pass(), { kind: "body", body: `ffff${"a".repeat(200_000)}`, times: 1 }] },
          /^gitedge: origin's answer to info\/refs is malformed: .*exceeds the maximum/,
        ],
        [
          "an empty ls-refs answer (200, nothing)",
          { [upload]: [{ kind: "body", body: "", times: 1 }] },
          /^gitedge: origin's answer to git-upload-pack \(ls-refs\) ended before its flush/,
        ],
        [
          "an ls-refs answer cut after its first ref",
          {
            [upload]: [{ kind: "body", body: encodePkts([`${main} refs/heads/main\n`]), times: 1 }],
          },
          /^gitedge: origin's answer to git-upload-pack \(ls-refs\) ended before its flush/,
        ],
      ];
      let builds = 0;
      for (const [what, plan, expected] of cases) {
        relay.setFaults(plan);
        const res = await fetch(`${edge.url}/_edge/warm/r.git`, { method: "POST" });
        const text = await res.text();
        assertEquals(res.status, 502, `${what}: ${text}`);
        assertMatch(text, expected, what);
        noUrl(text, what);
        builds++;
        const st = await settled(edge, "r.git", () => true);
        // Nothing published from an answer the origin cut short: no empty `ready` snapshot.
        assertEquals([st.state, st.builds, st.tips], ["none", builds, []], `${what}: status`);
        noUrl(String(st.lastError), `${what}: lastError`);
      }
      // Git's own request for the advertisement: the origin's garbage is a 502, not a 400.
      relay.setFaults({ [adv]: { kind: "body", body: "zzzz", times: 1 } });
      const refs = await fetch(`${edge.url}/r.git/info/refs?service=git-upload-pack`, {
        headers: { "git-protocol": "version=2" },
      });
      const refsText = await refs.text();
      assertEquals(refs.status, 502, `info/refs: ${refsText}`);
      assertMatch(refsText, /^gitedge: origin's answer to info\/refs is malformed/);
      noUrl(refsText, "info/refs");
      // The origin behaves again: the next warm builds.
      relay.setFaults({});
      assertEquals((await warmed(edge, "r.git")).state, "ready", "warm once the origin is sane");
      // An origin that is gone: the 502 says so without its address.
      await relay.stop();
      for (const [method, path] of [["POST", "_edge/warm/r.git"], ["GET", "r.git/info/refs"]]) {
        const res = await fetch(`${edge.url}/${path}`, { method });
        const text = await res.text();
        assertEquals(res.status, 502, `${path} with the origin gone: ${text}`);
        assertMatch(text, /^gitedge: origin unreachable \(info\/refs\): /);
        noUrl(text, `${path} with the origin gone`);
      }
    },
  );

  t("a response-cache hit still starts the snapshot build, and heals a damaged one", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 8, binaryBytes: 200_000 });
    await git(["clone", "-q", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
    // A clone without URIs fills the response cache (in the background: wait for the entry); with
    // plain clones not served from snapshots, it starts no build itself.
    await git(["-c", "protocol.version=2", "clone", "-q", `${w.edge.url}/r.git`, `${w.dir}/a`]);
    for (let i = 0; i < 200 && (await w.edge.listStored("cache/")).length === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assertEquals((await w.edge.listStored("cache/")).length, 1, "one answer cached");
    // The first URI clone is a cache hit; it starts the build all the same.
    await tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/b`]);
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/b`);
    assertEquals(await cacheHits(w.edge), 1, "a cache hit");
    const built = await settled(w.edge, "r.git", (st) => st.builds === 1);
    assertEquals([built.state, built.builds], ["ready", 1], `built: ${JSON.stringify(built)}`);
    const trace = await tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/c`]);
    assertEquals(urisFetched(trace).length, (built.packs as unknown[]).length, "URIs");
    // A pack cut short in the store: the next URI clone passes through, a cache hit again, and
    // starts the rebuild.
    const key = (await w.edge.listStored("repos/")).find((k) => k.endsWith(".pack"));
    assert(key, "a stored pack");
    const bytes = await w.edge.readStored(key);
    await w.edge.writeStored(key, bytes.subarray(0, bytes.length >> 1));
    const damaged = await tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/d`]);
    assertEquals(urisFetched(damaged).length, 0, "no URIs while a pack is damaged");
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/d`);
    assertEquals(await cacheHits(w.edge), 2, "a cache hit again");
    const healed = await settled(w.edge, "r.git", (st) => st.builds === 2);
    assertEquals([healed.state, healed.builds], ["ready", 2], `healed: ${JSON.stringify(healed)}`);
    const again = await tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/e`]);
    assertEquals(urisFetched(again).length, (healed.packs as unknown[]).length, "URIs again");
    await assertSameClone(`${w.dir}/direct`, `${w.dir}/e`);
  }, { edge: () => ({ snapshotPlainClones: false }) });

  t("warm rebuilds a snapshot whose stored pack is missing, cut short or rewritten", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 10, binaryBytes: 300_000 });
    await git(["clone", "-q", w.origin.repoUrl("r.git"), `${w.dir}/direct`]);
    let before = await warmed(w.edge, "r.git");
    const damages: [string, (key: string, bytes: Uint8Array) => Promise<void>][] = [
      ["deleted", (key) => w.edge.deleteStored(key)],
      ["cut short", (key, bytes) => w.edge.writeStored(key, bytes.subarray(0, bytes.length - 1))],
      ["a byte flipped in place", (key, bytes) => {
        bytes[bytes.length >> 1] ^= 0xff;
        return w.edge.writeStored(key, bytes);
      }],
    ];
    // A pack the manifest in force names (older ones stay in the store for a grace period).
    const manifestKey = `repos/${repoId(`${w.origin.url}/r.git`)}/manifest.json`;
    const packInForce = async () => {
      const manifest = JSON.parse(new TextDecoder().decode(await w.edge.readStored(manifestKey)));
      return manifest.layers[0][0].key as string;
    };
    for (const [what, damage] of damages) {
      const key = await packInForce();
      await damage(key, await w.edge.readStored(key));
      const after = await warmed(w.edge, "r.git");
      assertEquals(after.state, "ready", what);
      assert((after.builtAt as number) > (before.builtAt as number), `${what}: rebuilt`);
      assert(key !== await packInForce(), `${what}: the damaged pack is no longer named`);
      const trace = await tracedGit([...URI_CLONE, `${w.edge.url}/r.git`, `${w.dir}/${what}`]);
      assertEquals(urisFetched(trace).length, (after.packs as unknown[]).length, `${what}: URIs`);
      await assertSameClone(`${w.dir}/direct`, `${w.dir}/${what}`);
      before = after;
    }
    // Intact packs: warm has nothing to do.
    const same = await warmed(w.edge, "r.git");
    assertEquals(same.builtAt, before.builtAt, "nothing rebuilt");
  });

  t("a fetch of an object the origin does not have starts no build", async (w) => {
    await makeRepo(w.origin, "r.git", { commits: 3 });
    const res = await postUploadPack(
      `${w.edge.url}/r.git`,
      encodePkts([
        "command=fetch",
        "delim",
        `want ${"ab".repeat(20)}\n`,
        "packfile-uris http",
        "done\n",
        "flush",
      ]),
    );
    // The origin answers `ERR upload-pack: not our ref` (and may drop the connection after it).
    const text = await res.text().catch(() => "");
    assert(!text.includes("packfile"), `no pack for an unknown want: ${text}`);
    // A legitimate request afterwards: had the bad one scheduled a build, it would show.
    for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 50));
    const st = await (await fetch(`${w.edge.url}/_edge/status/r.git`)).json();
    assertEquals(st.snapshot.builds, 0, `no build: ${JSON.stringify(st)}`);
  });
}

/** A fault that lets its request through (so the next one in the list hits a later request). */
function pass(): Fault {
  return { kind: "pass", times: 1 };
}

/** `gitedge_response_cache_total{result="hit"}` from `/_edge/metrics`. */
async function cacheHits(edge: EdgeUnderTest): Promise<number> {
  const text = await (await fetch(`${edge.url}/_edge/metrics`)).text();
  return Number(/^gitedge_response_cache_total\{result="hit"\} (\d+)$/m.exec(text)?.[1] ?? 0);
}

/** Warms `repo` and returns its status. */
async function warmed(edge: EdgeUnderTest, repo: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${edge.url}/_edge/warm/${repo}`, { method: "POST" });
  const body = await res.json();
  assertEquals(res.status, 200, `warm: ${JSON.stringify(body)}`);
  return body.snapshot;
}

/**
 * Polls status (for 60 s at most: a loaded machine runs the Worker's builds slowly) until no build
 * runs and `done(status)`; returns the last status seen.
 */
async function settled(
  edge: EdgeUnderTest,
  repo: string,
  done: (st: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>> {
  let st: Record<string, unknown> = {};
  for (const until = Date.now() + 60_000; Date.now() < until;) {
    st = (await (await fetch(`${edge.url}/_edge/status/${repo}`)).json()).snapshot;
    if (st.state !== "building" && done(st)) return st;
    await new Promise((r) => setTimeout(r, 50));
  }
  return st;
}
