/**
 * Hostile traffic and faults, end to end, for every runtime: registered once per runtime like
 * `edge_suite.ts` (`abuseSuite(denoEdgeFactory, "deno")`, `abuseSuite(workerEdgeFactory, "worker")`).
 * Loopback only; every loop is bounded.
 */
import { git, GitCommandError, tempDir } from "../support/git.ts";
import { type Origin, type OriginOptions, startOrigin } from "../support/origin.ts";
import { makeRepo } from "../support/fixtures.ts";
import type { EdgeFactory, EdgeUnderTest, EdgeUnderTestOptions } from "../support/edge.ts";
import { serveLoopback } from "../support/http_server.ts";
import { assert, assertEquals } from "../support/assert.ts";

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
      }
      const post = await postUploadPack(
        `${edge.url}/r.git`,
        new TextEncoder().encode("0014command=ls-refs\n0000"),
      );
      assertEquals(post.status, 502, "upload-pack behind a redirecting origin");
      assert(!(await post.text()).includes("SECRET"), "no relayed body");
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
}
