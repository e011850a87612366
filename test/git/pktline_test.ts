import { assert, assertEquals, assertRejects, assertThrows } from "../support/assert.ts";
import { GitFormatError } from "../../src/git/errors.ts";
import {
  DELIM_PKT,
  encodePkt,
  encodePkts,
  FLUSH_PKT,
  MAX_PKT_DATA,
  MAX_PKT_LENGTH,
  type Pkt,
  pktBytes,
  PktLineError,
  PktLineReader,
  PktLineReaderClosedError,
  pktLineStream,
  pktSpans,
  pktText,
  RESPONSE_END_PKT,
} from "../../src/git/pktline.ts";
import { tempDir } from "../support/git.ts";
import { chunked, type ChunkPlan, collect, concatBytes, utf8 } from "../support/streams.ts";
import { advertisement, makeRepo, uploadPack } from "./transcripts.ts";

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** Reads every packet, returning them and the byte offset after each. */
async function readAll(stream: ReadableStream<Uint8Array>): Promise<Pkt[]> {
  const reader = new PktLineReader(stream);
  const out: Pkt[] = [];
  for (let p = await reader.read(); p !== null; p = await reader.read()) out.push(p);
  return out;
}

function reencode(pkts: Pkt[]): Uint8Array {
  return concatBytes(pkts.map(pktBytes));
}

const PLANS: ChunkPlan[] = [
  [1 << 20],
  "bytewise",
  { seed: 1 },
  { seed: 2, maxChunk: 7 },
  { seed: 3, maxChunk: 5000 },
];

/** A real transcript: advertisement, then an ls-refs request answered by upload-pack. */
async function realTranscript(): Promise<Uint8Array> {
  await using dir = await tempDir();
  const repo = await makeRepo(dir.path);
  const lsRefs = encodePkts([
    "command=ls-refs\n",
    "agent=git/2.39.5",
    "delim",
    "peel\n",
    "symrefs\n",
    "flush",
  ]);
  return concatBytes([await advertisement(repo.path), await uploadPack(repo.path, lsRefs)]);
}

Deno.test("encodePkt frames text and bytes with a lower-case hex length", () => {
  assertEquals(text(encodePkt("a\n")), "0006a\n");
  assertEquals(text(encodePkt("")), "0004");
  assertEquals(text(encodePkt(new Uint8Array(0xfb).fill(0x61))).slice(0, 4), "00ff");
  assertEquals(encodePkt(new Uint8Array(MAX_PKT_DATA)).length, MAX_PKT_LENGTH);
  assertEquals(text(encodePkt(new Uint8Array(MAX_PKT_DATA))).slice(0, 4), "fff0");
  assertEquals(text(FLUSH_PKT) + text(DELIM_PKT) + text(RESPONSE_END_PKT), "000000010002");
  const err = assertThrows(() => encodePkt(new Uint8Array(MAX_PKT_DATA + 1)), PktLineError);
  assertEquals(err.code, "too-long");
  assert(err instanceof GitFormatError);
});

Deno.test("encodePkts handles special keywords and pktText strips one newline", () => {
  assertEquals(
    text(encodePkts(["a", "flush", "delim", "response-end", utf8("flush"), { type: "flush" }])),
    "0005a0000000100020009flush0000",
  );
  assertEquals(pktText({ type: "data", data: utf8("x\n\n") }), "x\n");
  assertEquals(pktText({ type: "data", data: utf8("x") }), "x");
  assertEquals(assertThrows(() => pktText({ type: "flush" }), PktLineError).code, "not-data");
});

Deno.test("a real transcript decodes and re-encodes byte for byte under every chunking", async () => {
  const bytes = await realTranscript();
  const reference = await readAll(chunked(bytes, [bytes.length]));
  assertEquals(reencode(reference), bytes);
  const texts = reference.map((p) => (p.type === "data" ? pktText(p) : p.type));
  assertEquals(texts[0], "version 2");
  assert(texts.includes("flush"));
  assert(texts.some((t) => t.endsWith(" HEAD symref-target:refs/heads/main")));
  for (const plan of PLANS) {
    const pkts = await readAll(chunked(bytes, plan));
    assertEquals(pkts, reference, `plan ${JSON.stringify(plan)}`);
  }
});

Deno.test("special packets, empty data and upper-case hex decode", async () => {
  const pkts = await readAll(chunked(utf8("0000000100020004000Ahello\n"), "bytewise"));
  assertEquals(pkts, [
    { type: "flush" },
    { type: "delim" },
    { type: "response-end" },
    { type: "data", data: new Uint8Array(0) },
    { type: "data", data: utf8("hello\n") },
  ]);
});

Deno.test("malformed input raises typed errors", async () => {
  const cases: [string, string][] = [
    ["zzzz", "bad-length"],
    ["00g1abc", "bad-length"],
    ["0003", "bad-length"],
    ["fff1" + "x".repeat(100), "too-long"],
    ["ffff", "too-long"],
    ["00", "truncated"],
    ["0006a\n000", "truncated"],
    ["0010abc", "truncated"],
    ["0005", "truncated"],
  ];
  for (const [input, code] of cases) {
    for (const plan of ["bytewise", [1 << 16]] as ChunkPlan[]) {
      const err = await assertRejects(() => readAll(chunked(utf8(input), plan)), PktLineError);
      assertEquals(err.code, code, `input ${JSON.stringify(input)}`);
      assert(err.message.length > 20, err.message);
    }
  }
});

Deno.test("read returns null at a clean end, repeatedly", async () => {
  const reader = new PktLineReader(chunked(utf8("0000"), "bytewise"));
  assertEquals(await reader.read(), { type: "flush" });
  assertEquals(await reader.read(), null);
  assertEquals(await reader.read(), null);
  const empty = new PktLineReader(chunked(new Uint8Array(0), "bytewise"));
  assertEquals(await empty.peek(), null);
  assertEquals(await empty.read(), null);
});

Deno.test("peek does not consume; readDataText checks the packet kind", async () => {
  const reader = new PktLineReader(chunked(utf8("0008abc\n0000"), { seed: 5, maxChunk: 3 }));
  const peeked = await reader.peek();
  assertEquals(await reader.peek(), peeked);
  assertEquals(await reader.readDataText(), "abc");
  const err = await assertRejects(() => reader.readDataText(), PktLineError);
  assertEquals(err.code, "not-data");
  await assertRejects(() => reader.readDataText(), PktLineError, "stream ended");
});

Deno.test("remainder yields exactly the unread bytes at every split and chunking", async () => {
  const bytes = await realTranscript();
  // Offsets of each packet boundary.
  const pkts = await readAll(chunked(bytes, [bytes.length]));
  const ends: number[] = [];
  let at = 0;
  for (const p of pkts) ends.push(at += pktBytes(p).length);
  const small = bytes.subarray(0, ends[6]);
  const smallEnds = ends.slice(0, 7);
  // Every two-chunk split of a short prefix, after every packet count.
  for (let cut = 1; cut < small.length; cut++) {
    for (let n = 0; n <= 6; n += 3) {
      const reader = new PktLineReader(chunked(small, [cut, small.length]));
      for (let i = 0; i < n; i++) await reader.read();
      const rest = await collect(reader.remainder());
      assertEquals(rest, small.subarray(n === 0 ? 0 : smallEnds[n - 1]), `cut ${cut} n ${n}`);
    }
  }
  // Whole transcript, several chunkings, with a pending peek.
  for (const plan of PLANS) {
    const reader = new PktLineReader(chunked(bytes, plan));
    for (let i = 0; i < 4; i++) await reader.read();
    await reader.peek();
    assertEquals(await collect(reader.remainder()), bytes.subarray(ends[3]));
    await assertRejects(() => reader.read(), PktLineReaderClosedError);
  }
});

Deno.test("remainder after the end of input is empty and cancellation reaches the source", async () => {
  const reader = new PktLineReader(chunked(utf8("0000"), [4]));
  await reader.read();
  await reader.read();
  assertEquals((await collect(reader.remainder())).length, 0);

  let cancelled: unknown = undefined;
  const source = new ReadableStream<Uint8Array>({
    pull(c) {
      c.enqueue(utf8("0005a"));
    },
    cancel(reason) {
      cancelled = reason;
    },
  });
  const r2 = new PktLineReader(source);
  await r2.read();
  await r2.remainder().cancel("stop");
  assertEquals(cancelled, "stop");
});

Deno.test("reading pulls lazily and a packet inside one chunk is not copied", async () => {
  let pulls = 0;
  const chunk = utf8("0006a\n0006b\n");
  const source = new ReadableStream<Uint8Array>({
    pull(c) {
      pulls++;
      c.enqueue(chunk.slice());
    },
  }, { highWaterMark: 0 });
  const reader = new PktLineReader(source);
  const first = await reader.read();
  assert(first?.type === "data");
  assertEquals(pulls, 1);
  assertEquals(first.data.byteLength, 2);
  assertEquals(first.data.buffer.byteLength, chunk.length, "payload should be a view of the chunk");
  await reader.read();
  assertEquals(pulls, 1);
  await reader.read();
  assertEquals(pulls, 2);
  await reader.cancel();
  await assertRejects(() => reader.peek(), PktLineReaderClosedError);
});

Deno.test("pktLineStream decodes through pipeThrough and surfaces errors", async () => {
  const out: Pkt[] = [];
  for await (const p of chunked(utf8("0006a\n0000"), "bytewise").pipeThrough(pktLineStream())) {
    out.push(p);
  }
  assertEquals(out, [{ type: "data", data: utf8("a\n") }, { type: "flush" }]);
  await assertRejects(
    () => collectPkts(chunked(utf8("0006a"), [2]).pipeThrough(pktLineStream())),
    PktLineError,
  );
});

async function collectPkts(s: ReadableStream<Pkt>): Promise<Pkt[]> {
  const out: Pkt[] = [];
  for await (const p of s) out.push(p);
  return out;
}

Deno.test("pktSpans gives each packet of a buffer with its place, header included", () => {
  const bytes = encodePkts(["command=fetch\n", "delim", "want x\n", "flush"]);
  const spans = [...pktSpans(bytes)].map(({ pkt, start, end }) => [pkt.type, start, end]);
  assertEquals(spans, [["data", 0, 18], ["delim", 18, 22], ["data", 22, 33], ["flush", 33, 37]]);
  assertEquals(pktText([...pktSpans(bytes)][2].pkt), "want x");
  assertThrows(() => [...pktSpans(bytes.subarray(0, 20))], PktLineError);
});
