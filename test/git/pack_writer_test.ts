import { assert, assertEquals, assertRejects, assertThrows } from "../support/assert.ts";
import {
  OBJ_BLOB,
  OBJ_COMMIT,
  OBJ_OFS_DELTA,
  OBJ_TAG,
  PackFormatError,
} from "../../src/git/pack.ts";
import { scanPack } from "../../src/git/pack_reader.ts";
import { encodeEntryHeader, encodeOfsOffset, PackWriter } from "../../src/git/pack_writer.ts";
import { tempDir } from "../support/git.ts";
import { chunked, collect } from "../support/streams.ts";
import { SeededRandom } from "../support/random.ts";
import { buildRepo, packObjects, verifyPack } from "../support/pack_fixtures.ts";

/** A sink collecting everything, plus the bytes received so far. */
function memorySink(delayMs = 0) {
  const chunks: Uint8Array[] = [];
  let received = 0;
  const sink = new WritableStream<Uint8Array>({
    async write(chunk) {
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      chunks.push(chunk.slice());
      received += chunk.length;
    },
  }, { highWaterMark: 1 });
  return {
    sink,
    received: () => received,
    bytes: () => collect(ReadableStream.from(chunks)),
  };
}

Deno.test("encodeEntryHeader and encodeOfsOffset produce git's encodings", () => {
  assertEquals([...encodeEntryHeader(OBJ_BLOB, 0)], [0x30]);
  assertEquals([...encodeEntryHeader(OBJ_BLOB, 15)], [0x3f]);
  assertEquals([...encodeEntryHeader(OBJ_BLOB, 16)], [0xb0, 0x01]);
  assertEquals([...encodeEntryHeader(OBJ_COMMIT, 1000)], [0x98, 0x3e]);
  assertEquals([...encodeEntryHeader(OBJ_TAG, 2 ** 40)], [
    0xc0,
    0x80,
    0x80,
    0x80,
    0x80,
    0x80,
    0x02,
  ]);
  assertEquals([...encodeOfsOffset(1)], [0x01]);
  assertEquals([...encodeOfsOffset(127)], [0x7f]);
  assertEquals([...encodeOfsOffset(128)], [0x80, 0x00]);
  assertEquals([...encodeOfsOffset(16511)], [0xff, 0x7f]);
  assertEquals([...encodeOfsOffset(16512)], [0x80, 0x80, 0x00]);
  assertThrows(() => encodeOfsOffset(0), RangeError);
  assertThrows(() => encodeEntryHeader(OBJ_BLOB, -1), RangeError);
});

Deno.test("pack writer", async (t) => {
  await using dir = await tempDir();
  const repo = `${dir.path}/repo`;
  await buildRepo(repo, { commits: 60 });
  const pack = await packObjects(repo);
  const summary = await scanPack(chunked(pack, [65536]));
  const entryBytes = (i: number) =>
    pack.subarray(summary.entries[i].offset, summary.entries[i].end);

  await t.step("git's entry headers re-encode to the same bytes", () => {
    for (const e of summary.entries) {
      const typeSize = encodeEntryHeader(e.type, e.size);
      const original = pack.subarray(e.offset, e.offset + e.headerLength);
      assertEquals(original.subarray(0, typeSize.length), typeSize, `entry ${e.index}`);
      if (e.type === OBJ_OFS_DELTA) {
        assertEquals(
          original.subarray(typeSize.length),
          encodeOfsOffset(e.offset - e.baseOffset!),
        );
      }
    }
  });

  await t.step("re-writing a pack entry by entry gives identical bytes", async () => {
    const out = memorySink();
    const writer = new PackWriter(out.sink, summary.objects);
    for (const e of summary.entries) await writer.writeEntry(e, entryBytes(e.index));
    const result = await writer.finish();
    assertEquals(await out.bytes(), pack);
    assertEquals(result, {
      hash: summary.checksum,
      size: pack.length,
      objects: summary.objects,
    });
    assertEquals(writer.hash, summary.checksum);
  });

  await t.step("streamed entries in random pieces give identical bytes", async () => {
    const out = memorySink();
    const writer = new PackWriter(out.sink, summary.objects);
    const rand = new SeededRandom(5);
    for (const e of summary.entries) {
      const bytes = entryBytes(e.index);
      await writer.beginEntry(e, bytes.subarray(0, e.headerLength));
      for (let at = e.headerLength; at < bytes.length;) {
        const n = Math.min(bytes.length - at, 1 + Math.floor(rand.float() * 300));
        await writer.writeData(bytes.subarray(at, at + n));
        at += n;
      }
    }
    await writer.finish();
    assertEquals(await out.bytes(), pack);
  });

  await t.step(
    "dropping entries re-encodes moved OFS_DELTA bases; git accepts the result",
    async () => {
      // Drop every other entry that no delta depends on, so later deltas move closer to their bases.
      const bases = new Set(summary.entries.map((e) => e.baseOffset));
      const kept = summary.entries.filter((e) =>
        e.type === OBJ_OFS_DELTA || bases.has(e.offset) || e.index % 2 === 0
      );
      const out = memorySink();
      const writer = new PackWriter(out.sink, kept.length);
      for (const e of kept) await writer.writeEntry(e, entryBytes(e.index));
      await writer.finish();
      const written = await out.bytes();
      const rescanned = await scanPack(chunked(written, [4096]));
      assertEquals(rescanned.objects, kept.length);
      const moved = rescanned.entries.filter((e, i) =>
        e.type === OBJ_OFS_DELTA &&
        e.offset - e.baseOffset! !== kept[i].offset - kept[i].baseOffset!
      );
      assert(moved.length > 3, `only ${moved.length} delta headers re-encoded`);
      const original = await verifyPack(dir.path, "all", pack);
      const subset = await verifyPack(dir.path, "subset", written);
      const keptOffsets = new Set(kept.map((e) => e.offset));
      const expected = original.filter((o) => keptOffsets.has(o.offset)).map((o) => o.id);
      assertEquals(
        subset.map((o) => o.id).sort(),
        expected.sort(),
      );
    },
  );

  await t.step("count and size violations are PackFormatErrors", async () => {
    const [first] = summary.entries;
    const tooFew = new PackWriter(memorySink().sink, 2);
    await tooFew.writeEntry(first, entryBytes(0));
    assertEquals(
      (await assertRejects(tooFew.finish(), PackFormatError)).code,
      "bad-count",
    );

    const tooMany = new PackWriter(memorySink().sink, 1);
    await tooMany.writeEntry(first, entryBytes(0));
    await assertRejects(
      tooMany.writeEntry(first, entryBytes(0)),
      Error,
      /refusing to write another/,
    );

    const short = new PackWriter(memorySink().sink, 1);
    await short.beginEntry(first, entryBytes(0).subarray(0, first.headerLength));
    assertEquals(
      (await assertRejects(short.finish(), PackFormatError)).code,
      "size-mismatch",
    );
    assertEquals(
      (await assertRejects(
        short.writeData(new Uint8Array(first.compressedLength + 1)),
        PackFormatError,
      )).code,
      "size-mismatch",
    );

    const delta = summary.entries.find((e) => e.type === OBJ_OFS_DELTA)!;
    const orphan = new PackWriter(memorySink().sink, 1);
    assertEquals(
      (await assertRejects(orphan.writeEntry(delta, entryBytes(delta.index)), PackFormatError))
        .code,
      "bad-delta-base",
    );
  });

  await t.step("writes wait for a slow sink (bounded buffering)", async () => {
    const out = memorySink(1);
    const writer = new PackWriter(out.sink, summary.objects);
    for (const e of summary.entries) {
      await writer.writeEntry(e, entryBytes(e.index));
      // At most the 64 KiB gathering buffer may be pending.
      assert(writer.size - out.received() <= 64 * 1024);
    }
    await writer.finish();
    assertEquals(out.received(), pack.length);
    assert(pack.length > 1 << 20, "the pack is big enough to need many sink writes");
  });
});
