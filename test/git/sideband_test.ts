import { sha1 } from "@noble/hashes/legacy.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { GitFormatError } from "../../src/git/errors.ts";
import { encodePkts, MAX_PKT_LENGTH, PktLineError, PktLineReader } from "../../src/git/pktline.ts";
import {
  demuxSideband,
  encodeSideband,
  encodeSidebandText,
  MAX_SIDEBAND_DATA,
  SidebandFiller,
  sidebandMuxStream,
  SidebandRemoteError,
} from "../../src/git/sideband.ts";
import { git, tempDir } from "../support/git.ts";
import { chunked, type ChunkPlan, collect, concatBytes, utf8 } from "../support/streams.ts";
import { BIG_BLOB_SIZE, makeRepo, uploadPack } from "./transcripts.ts";

/** A fetch request for everything on main, with progress (no `no-progress`). */
function fetchRequest(want: string): Uint8Array {
  return encodePkts([
    "command=fetch",
    "agent=git/2.39.5",
    "object-format=sha1",
    "delim",
    "thin-pack",
    "ofs-delta",
    `want ${want}\n`,
    "done\n",
    "flush",
  ]);
}

/** Runs `git index-pack --stdin` on `pack` in a fresh repository; returns the pack name. */
async function indexPack(pack: Uint8Array): Promise<string> {
  await using dir = await tempDir();
  await git(["init", "-q", "--bare", dir.path]);
  const out = await git(["index-pack", "--stdin"], { cwd: dir.path, stdin: pack });
  return out.trim().replace(/^pack\t/, "");
}

Deno.test("demuxSideband extracts a real upload-pack pack that git index-pack accepts", async () => {
  await using dir = await tempDir();
  const repo = await makeRepo(dir.path);
  const response = await uploadPack(repo.path, fetchRequest(repo.main));
  const plans: ChunkPlan[] = [[response.length], { seed: 11 }, { seed: 12, maxChunk: 3000 }];
  let reference: Uint8Array | undefined;
  for (const plan of plans) {
    const reader = new PktLineReader(chunked(response, plan));
    assertEquals(await reader.readDataText(), "packfile");
    const progress: string[] = [];
    const pack = await collect(demuxSideband(reader, { onProgress: (m) => progress.push(m) }));
    assertEquals(await reader.read(), null, "the flush ends the section and the response");
    assert(progress.join("").includes("Enumerating objects"), progress.join(""));
    assertEquals(new TextDecoder().decode(pack.subarray(0, 4)), "PACK");
    assert(pack.length > BIG_BLOB_SIZE);
    const trailer = bytesToHex(pack.subarray(pack.length - 20));
    assertEquals(bytesToHex(sha1(pack.subarray(0, pack.length - 20))), trailer);
    if (reference === undefined) {
      reference = pack;
      assertEquals(await indexPack(pack), trailer);
    } else {
      assertEquals(pack, reference);
    }
  }
});

Deno.test("encodeSideband splits at the packet limit and round-trips through demux", async () => {
  const data = new Uint8Array(MAX_SIDEBAND_DATA * 2 + 10).map((_, i) => i * 7);
  const framed = encodeSideband(1, data);
  assertEquals(framed.length, data.length + 3 * 5);
  const reader = new PktLineReader(chunked(concatBytes([framed, utf8("0000")]), { seed: 4 }));
  const sizes: number[] = [];
  const probe = new PktLineReader(chunked(framed, [framed.length]));
  for (let p = await probe.read(); p !== null; p = await probe.read()) {
    assert(p.type === "data");
    assertEquals(p.data[0], 1);
    sizes.push(p.data.length + 4);
  }
  assertEquals(sizes, [MAX_PKT_LENGTH, MAX_PKT_LENGTH, 15]);
  assertEquals(await collect(demuxSideband(reader)), data);
  assertEquals(encodeSideband(2, new Uint8Array(0)).length, 0);
  assertEquals(new TextDecoder().decode(encodeSidebandText(2, "hi\n")), "0008\x02hi\n");
});

Deno.test("sidebandMuxStream frames chunks and demux restores them", async () => {
  const data = new Uint8Array(200_000).map((_, i) => (i * 31) >> 3);
  const framed = await collect(
    chunked(data, { seed: 9, maxChunk: 90_000 }).pipeThrough(
      sidebandMuxStream(),
    ),
  );
  const input = concatBytes([encodeSidebandText(2, "Counting\r"), framed, utf8("0000")]);
  const progress: string[] = [];
  const out = await collect(
    demuxSideband(new PktLineReader(chunked(input, "bytewise")), {
      onProgress: (m) => progress.push(m),
    }),
  );
  assertEquals(out, data);
  assertEquals(progress, ["Counting\r"]);
});

Deno.test("band 3 errors the stream with the remote's message", async () => {
  const input = concatBytes([
    encodeSideband(1, utf8("PACK")),
    encodeSidebandText(3, "upload-pack: not our ref deadbeef\n"),
  ]);
  const reader = new PktLineReader(chunked(input, "bytewise"));
  const err = await assertRejects(() => collect(demuxSideband(reader)), SidebandRemoteError);
  assertEquals(err.remoteMessage, "upload-pack: not our ref deadbeef");
  assertEquals(err.code, "remote-error");
  assert(err instanceof GitFormatError);
});

Deno.test("malformed side-band input raises typed errors", async () => {
  const cases: [Uint8Array, string, typeof GitFormatError][] = [
    [utf8("0006\x05x"), "bad-band", GitFormatError],
    [utf8("0004"), "bad-band", GitFormatError],
    [utf8("0006\x01x0001"), "bad-band", GitFormatError],
    [utf8("0006\x01x00"), "truncated", PktLineError],
    [utf8("zzzz"), "bad-length", PktLineError],
  ];
  for (const [input, code, cls] of cases) {
    const reader = new PktLineReader(chunked(input, "bytewise"));
    const err = await assertRejects(() => collect(demuxSideband(reader)), cls);
    assertEquals(err.code, code);
  }
});

Deno.test("demux accepts end of input or response-end and pulls lazily", async () => {
  const input = concatBytes([encodeSideband(1, utf8("ab")), utf8("0002")]);
  assertEquals(await collect(demuxSideband(new PktLineReader(chunked(input, [3])))), utf8("ab"));
  assertEquals(
    await collect(demuxSideband(new PktLineReader(chunked(encodeSideband(1, utf8("c")), [1])))),
    utf8("c"),
  );

  let pulls = 0;
  const packet = encodeSideband(1, utf8("data"));
  const endless = new ReadableStream<Uint8Array>({
    pull(c) {
      pulls++;
      c.enqueue(packet);
    },
  }, { highWaterMark: 0 });
  const stream = demuxSideband(new PktLineReader(endless));
  const r = stream.getReader();
  assertEquals((await r.read()).value, utf8("data"));
  assert(pulls <= 2, `pulled ${pulls} chunks for one packet`);
  await r.cancel();
});

Deno.test("SidebandFiller fills packets to the most one holds, from chunks of any size", () => {
  const data = new Uint8Array(150_000).map((_, i) => (i * 7) % 251);
  const filler = new SidebandFiller(2);
  const packets: Uint8Array[] = [];
  for (let at = 0; at < data.length; at += 4096) {
    packets.push(...filler.push(data.subarray(at, at + 4096)));
  }
  assertEquals(packets.length, 2, "two full packets before the end");
  const last = filler.flush();
  assert(last !== null, "the rest in a last packet");
  packets.push(last);
  assertEquals(filler.flush(), null, "nothing left");
  assertEquals(packets.map((p) => p.length), [65520, 65520, 150_000 - 2 * MAX_SIDEBAND_DATA + 5]);
  // The same bytes as framing the data whole.
  assertEquals(concatBytes(packets), encodeSideband(2, data));
});
