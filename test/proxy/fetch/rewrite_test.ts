/**
 * Wire-level proof of the edge's fetch rewrite (`src/proxy/fetch/rewrite.ts`): real `git upload-pack`
 * protocol-v2 responses go through `injectBeforePackfile` cut at every byte and at seeded random
 * sizes, and come out byte-identical except for the `packfile-uris` section placed right before
 * the `packfile` header. Then stock git clones through a Deno edge with sideband-all on.
 */
import { withinDeadline } from "../../support/deadline.ts";
import { sha1 } from "@noble/hashes/legacy.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { assert, assertEquals, assertRejects } from "../../support/assert.ts";
import { PktLineError, PktLineReader } from "../../../src/git/pktline.ts";
import { encodeFetchSection, readFetchResponse } from "../../../src/git/fetch_response.ts";
import { formatPackfileUriLine } from "../../../src/git/packfile_uris.ts";
import { injectBeforePackfile } from "../../../src/proxy/fetch/rewrite.ts";
import { git, GIT_ENV, tempDir } from "../../support/git.ts";
import { chunked, type ChunkPlan, collect, concatBytes } from "../../support/streams.ts";
import {
  fetchRequest,
  makeRepo as makeTranscriptRepo,
  type TestRepo,
} from "../../git/transcripts.ts";
import { startOrigin } from "../../support/origin.ts";
import { assertSameClone, makeRepo } from "../../support/fixtures.ts";
import { denoEdgeFactory } from "../../support/edge.ts";
import { tracedGit, URI_CLONE, urisFetched, warm } from "../edge_suite.ts";

const PLANS: ChunkPlan[] = [
  "bytewise",
  { seed: 1 },
  { seed: 2, maxChunk: 7 },
  { seed: 3, maxChunk: 3000 },
  { seed: 4, maxChunk: 70_000 },
];

const PACK_URIS = [
  formatPackfileUriLine("ab".repeat(20), "http://edge.test/_edge/packs/r/pack-1.pack?exp=1&sig=x"),
  formatPackfileUriLine("cd".repeat(20), "http://edge.test/_edge/packs/r/pack-2.pack?exp=1&sig=y"),
];

/** One real origin response and what it must contain. */
interface Case {
  name: string;
  response: Uint8Array;
  sidebandAll: boolean;
  /** Substrings (latin-1) the raw response must hold, proving the fixture is what it claims. */
  mustContain: string[];
  hasPackfile: boolean;
}

/**
 * Stdout of `git upload-pack --stateless-rpc` (protocol v2) answering `request`, whatever its exit
 * status: an `ERR` answer comes with a non-zero exit.
 */
async function uploadPackRaw(
  repo: string,
  request: Uint8Array,
  config: string[],
): Promise<{ stdout: Uint8Array; success: boolean }> {
  const child = new Deno.Command("git", {
    args: [...config.flatMap((c) => ["-c", c]), "upload-pack", "--stateless-rpc", repo],
    env: { ...GIT_ENV, GIT_PROTOCOL: "version=2" },
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(request);
  await writer.close();
  const out = await child.output();
  return { stdout: out.stdout, success: out.success };
}

async function buildCases(repo: TestRepo): Promise<Case[]> {
  const config = ["uploadpack.allowRefInWant=true", "uploadpack.allowSidebandAll=true"];
  const answer = async (args: string[], expectSuccess = true) => {
    const { stdout, success } = await uploadPackRaw(repo.path, fetchRequest(args), config);
    assertEquals(success, expectSuccess, `upload-pack exit status for ${args.join(", ")}`);
    return stdout;
  };
  const want = `want ${repo.main}`;
  return [
    {
      name: "progress on band 2 interleaved",
      response: await answer(["thin-pack", "ofs-delta", want, "done"]),
      sidebandAll: false,
      mustContain: ["packfile\n", "\x02Enumerating objects", "PACK"],
      hasPackfile: true,
    },
    {
      name: "wanted-refs",
      response: await answer(["ofs-delta", "want-ref refs/heads/main", "done"]),
      sidebandAll: false,
      mustContain: ["wanted-refs\n", `${repo.main} refs/heads/main`, "packfile\n"],
      hasPackfile: true,
    },
    {
      name: "shallow-info",
      response: await answer(["ofs-delta", want, "deepen 1", "done"]),
      sidebandAll: false,
      mustContain: ["shallow-info\n", `shallow ${repo.main}`, "packfile\n"],
      hasPackfile: true,
    },
    {
      name: "acknowledgments with ready, then the pack",
      response: await answer([want, `have ${repo.first}`]),
      sidebandAll: false,
      mustContain: ["acknowledgments\n", `ACK ${repo.first}`, "ready\n", "packfile\n"],
      hasPackfile: true,
    },
    {
      name: "sideband-all with wanted-refs and shallow-info",
      response: await answer([
        "sideband-all",
        "ofs-delta",
        "want-ref refs/heads/main",
        "deepen 1",
        "done",
      ]),
      sidebandAll: true,
      mustContain: ["\x01wanted-refs\n", "\x01shallow-info\n", "\x01packfile\n"],
      hasPackfile: true,
    },
    {
      name: "sideband-all with progress",
      response: await answer(["sideband-all", "ofs-delta", want, "done"]),
      sidebandAll: true,
      mustContain: ["\x01packfile\n", "\x02Enumerating objects"],
      hasPackfile: true,
    },
    {
      name: "ERR for an object the origin does not have",
      response: await answer([`want ${"12".repeat(20)}`, "done"], false),
      sidebandAll: false,
      mustContain: ["ERR upload-pack: not our ref"],
      hasPackfile: false,
    },
    {
      name: "acknowledgments with NAK, no packfile",
      response: await answer([want, `have ${"34".repeat(20)}`]),
      sidebandAll: false,
      mustContain: ["acknowledgments\n", "NAK\n"],
      hasPackfile: false,
    },
  ];
}

function latin1(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    s += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return s;
}

/**
 * Where the `packfile` header packet starts, found by walking the 4-hex-digit length headers
 * (independent of the pkt-line reader under test); -1 when the response has none.
 */
function packfileHeaderOffset(bytes: Uint8Array, sidebandAll: boolean): number {
  const header = (sidebandAll ? "\x01" : "") + "packfile\n";
  let at = 0;
  while (at + 4 <= bytes.length) {
    const length = parseInt(latin1(bytes.subarray(at, at + 4)), 16);
    assert(Number.isInteger(length) && length !== 3, `pkt-line header at ${at}`);
    if (length < 4) {
      at += 4;
      continue;
    }
    if (latin1(bytes.subarray(at + 4, at + length)) === header) return at;
    at += length;
  }
  assertEquals(at, bytes.length, "response ends on a packet boundary");
  return -1;
}

/** The bytes the rewrite must produce: `section` spliced in at `offset`, nothing else changed. */
function spliced(response: Uint8Array, offset: number, section: Uint8Array): Uint8Array {
  if (offset < 0) return response;
  return concatBytes([response.subarray(0, offset), section, response.subarray(offset)]);
}

/** The sections and demultiplexed pack a client reads from `bytes`. */
async function clientView(bytes: Uint8Array, sidebandAll: boolean) {
  const sections: { section: string; lines: string[] }[] = [];
  let pack: Uint8Array | null = null;
  const reader = new PktLineReader(chunked(bytes, [bytes.length]));
  for await (const part of readFetchResponse(reader, { sidebandAll })) {
    if (part.section === "packfile") pack = await collect(part.pack);
    else sections.push(part);
  }
  return { sections, pack };
}

function assertValidPack(pack: Uint8Array): void {
  assertEquals(latin1(pack.subarray(0, 4)), "PACK", "pack signature");
  assertEquals(
    bytesToHex(sha1(pack.subarray(0, pack.length - 20))),
    bytesToHex(pack.subarray(pack.length - 20)),
    "pack trailer checksum",
  );
}

/** An origin body: `bytes` in chunks per `plan`, then `end` (close, or error with a reason). */
interface ObservedBody {
  stream: ReadableStream<Uint8Array>;
  /** Bytes handed to the consumer so far. */
  delivered(): number;
  /** The reason the consumer cancelled with, once it has. */
  cancelled: Promise<unknown>;
}

function observedBody(
  bytes: Uint8Array,
  plan: ChunkPlan,
  end: { error?: Error } = {},
): ObservedBody {
  const inner = chunked(bytes, plan).getReader();
  let delivered = 0;
  let onCancel: (reason: unknown) => void = () => {};
  const cancelled = new Promise<unknown>((resolve) => onCancel = resolve);
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await inner.read();
      if (!done) {
        delivered += value.length;
        controller.enqueue(value);
      } else if (end.error) controller.error(end.error);
      else controller.close();
    },
    async cancel(reason) {
      onCancel(reason);
      await inner.cancel(reason);
    },
  }, { highWaterMark: 0 });
  return { stream, delivered: () => delivered, cancelled };
}

/** Reads from `reader` until at least `n` bytes came out; returns them. */
async function readAtLeast(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  n: number,
): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let got = 0;
  while (got < n) {
    const { done, value } = await reader.read();
    assert(!done, `stream ended after ${got} of at least ${n} bytes`);
    parts.push(value);
    got += value.length;
  }
  return concatBytes(parts);
}

Deno.test("injectBeforePackfile on real upload-pack responses", async (t) => {
  await using dir = await tempDir();
  const repo = await makeTranscriptRepo(dir.path);
  const cases = await buildCases(repo);

  for (const c of cases) {
    await t.step(c.name, async () => {
      const raw = latin1(c.response);
      for (const s of c.mustContain) assert(raw.includes(s), `fixture holds ${JSON.stringify(s)}`);
      const offset = packfileHeaderOffset(c.response, c.sidebandAll);
      assertEquals(offset >= 0, c.hasPackfile, "packfile section present");
      const section = encodeFetchSection("packfile-uris", PACK_URIS, c.sidebandAll);
      const expected = spliced(c.response, offset, section);
      for (const plan of PLANS) {
        const out = await collect(
          injectBeforePackfile(chunked(c.response, plan), section, { sidebandAll: c.sidebandAll }),
        );
        assertEquals(out, expected, `output for plan ${JSON.stringify(plan)}`);
      }
      if (!c.hasPackfile) return;
      // Everything from the packfile header on (the pack with its progress) is untouched.
      assertEquals(
        expected.subarray(offset + section.length),
        c.response.subarray(offset),
        "pack bytes",
      );
      // A client sees the origin's sections, then packfile-uris, then the same pack.
      const before = await clientView(c.response, c.sidebandAll);
      const after = await clientView(expected, c.sidebandAll);
      assertEquals(after.sections, [...before.sections, {
        section: "packfile-uris",
        lines: PACK_URIS,
      }]);
      assert(after.pack !== null && before.pack !== null, "both carry a pack");
      assertEquals(after.pack, before.pack, "demultiplexed pack");
      assertValidPack(after.pack);
    });
  }

  // The progress response starts right with the packfile; the wanted-refs one has a section first.
  const progress = cases[0].response;
  const offset = packfileHeaderOffset(progress, false);
  const packStart = offset + "000dpackfile\n".length;
  const withRefs = cases[1].response;
  const refsEnd = packfileHeaderOffset(withRefs, false);
  assert(refsEnd > 20, "wanted-refs precede the packfile");
  const section = encodeFetchSection("packfile-uris", PACK_URIS, false);

  await t.step("the pack streams: the origin is read only as far as needed", async () => {
    const origin = observedBody(progress, { seed: 9, maxChunk: 1000 });
    const reader = injectBeforePackfile(origin.stream, section, { sidebandAll: false })
      .getReader();
    const head = await readAtLeast(reader, offset + section.length + 13);
    assertEquals(head.subarray(offset, offset + section.length), section, "section in place");
    assert(
      origin.delivered() < progress.length / 2,
      `read ${origin.delivered()} of ${progress.length} origin bytes to emit the section`,
    );
    await reader.cancel();
  });

  await t.step("an origin error mid-pack errors the output", async () => {
    for (const plan of ["bytewise", { seed: 10, maxChunk: 4000 }] as ChunkPlan[]) {
      const boom = new Error("origin connection reset");
      const cut = packStart + 5000;
      const origin = observedBody(progress.subarray(0, cut), plan, { error: boom });
      const reader = injectBeforePackfile(origin.stream, section, { sidebandAll: false })
        .getReader();
      const parts: Uint8Array[] = [];
      const outcome = withinDeadline(
        (async () => {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) return "ended cleanly";
            parts.push(value);
          }
        })(),
        "output after an origin error",
      );
      const err = await outcome.then((v) => new Error(String(v)), (e) => e);
      assertEquals(err, boom, "the origin's error reaches the reader");
      assertEquals(concatBytes(parts), spliced(progress.subarray(0, cut), offset, section));
    }
  });

  await t.step("an origin error before the packfile errors the output", async () => {
    const boom = new Error("origin went away");
    const origin = observedBody(withRefs.subarray(0, refsEnd - 10), "bytewise", { error: boom });
    const out = injectBeforePackfile(origin.stream, section, { sidebandAll: false });
    const err = await withinDeadline(collect(out), "output").then(() => null, (e) => e);
    assertEquals(err, boom);
  });

  await t.step("an origin body cut inside a packet before the packfile errors", async () => {
    const origin = observedBody(withRefs.subarray(0, refsEnd - 10), { seed: 11 });
    const out = injectBeforePackfile(origin.stream, section, { sidebandAll: false });
    await assertRejects(() => withinDeadline(collect(out), "output"), PktLineError, "ended inside");
  });

  await t.step("cancelling the output cancels the origin body", async () => {
    // Before the packfile header (the rewrite is still reading packets) and inside the pack.
    const points: [Uint8Array, number][] = [
      [withRefs, 0],
      [withRefs, 3],
      [progress, packStart + section.length + 20_000],
    ];
    for (const [response, readFirst] of points) {
      const origin = observedBody(response, { seed: 12, maxChunk: 500 });
      const reader = injectBeforePackfile(origin.stream, section, { sidebandAll: false })
        .getReader();
      if (readFirst > 0) await readAtLeast(reader, readFirst);
      await reader.cancel("client hung up");
      const reason = await withinDeadline(origin.cancelled, `cancel after ${readFirst} bytes`);
      assertEquals(reason, "client hung up", `origin cancelled after ${readFirst} bytes`);
      assert(origin.delivered() < response.length, "origin not read to the end");
    }
  });
});

Deno.test({
  name: "sideband-all end to end: stock git clones through the edge with packfile URIs",
  fn: async () => {
    await using origin = await startOrigin();
    // No credential memo: each fetch needs the origin's word (a probe fetch, fetch_probe.ts);
    // the answer is the edge's own or the origin's rewritten, banded either way.
    await using edge = await denoEdgeFactory({ origin: origin.url, chunks: 3, authTtlSeconds: 0 });
    await using dir = await tempDir();
    const fixture = await makeRepo(origin, "sba.git", {
      commits: 20,
      branches: 2,
      tags: 1,
      binaryBytes: 400_000,
    });
    await git(["config", "uploadpack.allowSidebandAll", "true"], { cwd: fixture.bare });
    const snap = await warm(edge, "sba.git");
    assertEquals(snap.state, "ready", "snapshot built");
    const packs = (snap.packs as { hash: string }[]).map((p) => p.hash).sort();
    assert(packs.length >= 2, `snapshot has several packs (${packs.length})`);

    // The edge advertises sideband-all (from the origin) next to packfile-uris.
    const adv = await fetch(`${edge.url}/sba.git/info/refs?service=git-upload-pack`, {
      headers: { "git-protocol": "version=2" },
    });
    const advText = await adv.text();
    assert(/fetch=[^\n]*sideband-all/.test(advText), `sideband-all advertised:\n${advText}`);
    assert(/fetch=[^\n]*packfile-uris/.test(advText), `packfile-uris advertised:\n${advText}`);

    await git(["clone", "-q", origin.repoUrl("sba.git"), `${dir.path}/direct`]);
    const trace = await tracedGit([...URI_CLONE, `${edge.url}/sba.git`, `${dir.path}/edge`], {
      env: { GIT_TRACE_PACKET: "1", GIT_TEST_SIDEBAND_ALL: "1" },
    });
    // fetch-pack asked for sideband-all and got the injected section band-wrapped: a bare
    // "packfile-uris" packet would have been a fatal "bad band" to it.
    assert(/> sideband-all$/m.test(trace), "fetch-pack requested sideband-all");
    assert(/< \\1packfile-uris$/m.test(trace), "fetch-pack read a band-1 packfile-uris header");
    assert(/> packfile-uris http$/m.test(trace), "fetch-pack asked for http packfile URIs");
    assertEquals(urisFetched(trace).map((f) => f.hash).sort(), packs, "packs by URI");
    await git(["fsck", "--full", "--strict"], { cwd: `${dir.path}/edge` });
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/edge`);

    const metrics = await (await fetch(`${edge.url}/_edge/metrics`)).text();
    const byUri = /^gitedge_fetch_(rewrites|answered)_total 1$/m;
    assert(byUri.test(metrics), `one fetch given URIs:\n${metrics}`);

    // The same exchange on the wire: the edge's answer to a sideband-all fetch carries the
    // snapshot's URIs in a band-1 packfile-uris section right before the packfile.
    const res = await fetch(`${edge.url}/sba.git/git-upload-pack`, {
      method: "POST",
      headers: {
        "git-protocol": "version=2",
        "content-type": "application/x-git-upload-pack-request",
      },
      body: fetchRequest([
        "sideband-all",
        "ofs-delta",
        ...(snap.tips as string[]).map((tip) => `want ${tip}`),
        "packfile-uris http",
        "done",
      ]) as Uint8Array<ArrayBuffer>,
    });
    assertEquals(res.status, 200, "edge fetch");
    const body = new Uint8Array(await res.arrayBuffer());
    const at = packfileHeaderOffset(body, true);
    assert(at > 0, "a band-1 packfile header");
    const view = await clientView(body, true);
    const uris = view.sections.find((s) => s.section === "packfile-uris");
    assert(uris !== undefined, `a packfile-uris section: ${JSON.stringify(view.sections)}`);
    assertEquals(uris.lines.map((l) => l.split(" ")[0]).sort(), packs, "URIs for every pack");
    assertEquals(view.sections.at(-1)?.section, "packfile-uris", "last before the packfile");
    assert(latin1(body).includes("\x01packfile-uris\n"), "section header in band 1");
    assert(view.pack !== null, "a pack follows (the origin's small one, or the edge's empty one)");
    assertValidPack(view.pack);
  },
});

/**
 * A reverse proxy in front of `originUrl` that gzips every response body, as a compressing front
 * (nginx with `gzip_types`) may do.
 */
function startGzipFront(originUrl: string): { url: string } & AsyncDisposable {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const url = new URL(req.url);
    const headers = new Headers(req.headers);
    headers.set("accept-encoding", "identity");
    const res = await fetch(`${originUrl}${url.pathname}${url.search}`, {
      method: req.method,
      headers,
      body: req.body ? await req.arrayBuffer() : undefined,
    });
    const out = new Headers(res.headers);
    out.set("content-encoding", "gzip");
    out.delete("content-length");
    const body = res.body?.pipeThrough(new CompressionStream("gzip")) ?? null;
    return new Response(body, { status: res.status, headers: out });
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

Deno.test({
  name: "an origin that gzips its responses: clones through the edge work, with URIs",
  fn: async () => {
    await using origin = await startOrigin();
    await using front = startGzipFront(origin.url);
    await using edge = await denoEdgeFactory({ origin: front.url, chunks: 2 });
    await using dir = await tempDir();
    await makeRepo(origin, "gz.git", { commits: 10, binaryBytes: 300_000 });
    await git(["clone", "-q", `${front.url}/gz.git`, `${dir.path}/direct`]);
    const snap = await warm(edge, "gz.git");
    const packs = (snap.packs as { hash: string }[]).map((p) => p.hash).sort();
    // fetch() hands the edge decoded bodies: what it relays must not claim to be gzip.
    const trace = await tracedGit([...URI_CLONE, `${edge.url}/gz.git`, `${dir.path}/v2`], {
      env: { GIT_TRACE_PACKET: "1" },
    });
    assertEquals(urisFetched(trace).map((f) => f.hash).sort(), packs, "packs by URI");
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/v2`);
    await git(["-c", "protocol.version=0", "clone", "-q", `${edge.url}/gz.git`, `${dir.path}/v0`]);
    await assertSameClone(`${dir.path}/direct`, `${dir.path}/v0`);
  },
});
