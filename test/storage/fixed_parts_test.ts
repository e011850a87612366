import { assertEquals, assertRejects } from "../support/assert.ts";
import {
  fixedSizeParts,
  type Part,
  type PartBufferHolder,
  PartSizeError,
} from "../../src/storage/fixed_parts.ts";

/** A stream emitting `chunks` one by one, recording whether it was cancelled. */
function chunked(
  chunks: number[],
): { stream: ReadableStream<Uint8Array>; cancelled: () => boolean } {
  let next = 0;
  let value = 0;
  let wasCancelled = false;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (next === chunks.length) return controller.close();
      const chunk = new Uint8Array(chunks[next++]);
      for (let i = 0; i < chunk.length; i++) chunk[i] = value++ & 0xff;
      controller.enqueue(chunk);
    },
    cancel() {
      wasCancelled = true;
    },
  });
  return { stream, cancelled: () => wasCancelled };
}

async function collect(
  stream: ReadableStream<Uint8Array>,
  size: number,
  holder?: PartBufferHolder,
): Promise<Part[]> {
  const parts: Part[] = [];
  for await (const part of fixedSizeParts(stream, size, holder)) parts.push(part);
  return parts;
}

function sequence(from: number, length: number): number[] {
  return Array.from({ length }, (_, i) => (from + i) & 0xff);
}

Deno.test("fixedSizeParts re-chunks uneven chunks into equal parts and flags the last", async () => {
  const parts = await collect(chunked([3, 7, 1, 9, 4]).stream, 10);
  assertEquals(parts.map((p) => p.bytes.byteLength), [10, 10, 4]);
  assertEquals(parts.map((p) => p.last), [false, false, true]);
  assertEquals(Array.from(parts[1].bytes), sequence(10, 10));
  assertEquals(Array.from(parts[2].bytes), sequence(20, 4));
});

Deno.test("fixedSizeParts marks a full part last when the source ends on a boundary", async () => {
  const parts = await collect(chunked([5, 0, 5, 0]).stream, 5);
  assertEquals(parts.map((p) => [p.bytes.byteLength, p.last]), [[5, false], [5, true]]);
});

Deno.test("fixedSizeParts yields one empty last part for an empty source", async () => {
  const parts = await collect(chunked([]).stream, 8);
  assertEquals(parts.map((p) => [p.bytes.byteLength, p.last]), [[0, true]]);
});

Deno.test("fixedSizeParts grows its buffer past the initial capacity", async () => {
  const big = 200 * 1024;
  const parts = await collect(chunked([big, big]).stream, 3 * big);
  assertEquals(parts.length, 1);
  assertEquals(parts[0].bytes.byteLength, 2 * big);
  assertEquals(Array.from(parts[0].bytes.subarray(big - 2, big + 2)), sequence(big - 2, 4));
});

Deno.test("fixedSizeParts doubles small parts, and past 1 MiB takes the full part size at once", async () => {
  const size = 8 * 1024 * 1024;
  const small = await collect(chunked([200 * 1024]).stream, size);
  assertEquals(small[0].bytes.buffer.byteLength, 256 * 1024, "a small body stays small");
  const large = await collect(chunked([700 * 1024, 700 * 1024]).stream, size);
  assertEquals(large[0].bytes.byteLength, 1400 * 1024);
  // No 2 MiB and 4 MiB copies on the way to 8 MiB.
  assertEquals(large[0].bytes.buffer.byteLength, size);
});

Deno.test("fixedSizeParts with a holder fills every full part into one buffer, kept for the next body", async () => {
  const size = 2 * 1024 * 1024;
  const holder: PartBufferHolder = {};
  const seen = new Set<ArrayBufferLike>();
  let offset = 0;
  for await (const part of fixedSizeParts(chunked([size, size, size / 2]).stream, size, holder)) {
    // Each part is read before the next is asked for, as a multipart upload does.
    assertEquals(Array.from(part.bytes.subarray(0, 4)), sequence(offset, 4));
    offset += part.bytes.byteLength;
    seen.add(part.bytes.buffer);
  }
  assertEquals(offset, 2.5 * size);
  assertEquals(seen.size, 1, "one buffer for every part");
  const kept = holder.buffer!;
  assertEquals(kept.byteLength, size);
  // The next body is filled into the kept buffer: nothing allocated.
  const next = await collect(chunked([100]).stream, size, holder);
  assertEquals(next[0].bytes.buffer, kept.buffer);
});

Deno.test("fixedSizeParts propagates a source error", async () => {
  const failing = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new Uint8Array(4));
      controller.error(new Error("origin went away"));
    },
  });
  await assertRejects(collect(failing, 16), Error, /origin went away/);
});

Deno.test("fixedSizeParts cancels the source when the consumer stops early", async () => {
  const source = chunked([4, 4, 4, 4]);
  for await (const part of fixedSizeParts(source.stream, 4)) {
    assertEquals(part.last, false);
    break;
  }
  assertEquals(source.cancelled(), true);
});

Deno.test("fixedSizeParts rejects a non-positive part size", async () => {
  await assertRejects(collect(chunked([1]).stream, 0), PartSizeError);
});
