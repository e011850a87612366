import { assert, assertEquals, assertMatch, assertThrows } from "../support/assert.ts";
import { OBJ_BLOB, OBJ_OFS_DELTA, OBJ_REF_DELTA } from "../../src/git/pack.ts";
import { PackEntryTable } from "../../src/git/pack_entries.ts";
import { packScanner, scanPack } from "../../src/git/pack_reader.ts";
import { planSplit, splitPack } from "../../src/git/pack_split.ts";
import { git, tempDir } from "../support/git.ts";
import { chunked } from "../support/streams.ts";
import { buildRepo, packObjects, tinyBlobPack, verifyPack } from "../support/pack_fixtures.ts";

/** Asserts every accessor of `a` and `b` agrees on every entry. */
function assertSameIndex(a: PackEntryTable, b: PackEntryTable): void {
  assertEquals(a.length, b.length);
  assertEquals(a.dataEnd, b.dataEnd);
  assertEquals(a.refDeltas, b.refDeltas);
  for (let i = 0; i < a.length; i++) {
    assertEquals(a.entry(i), b.entry(i), `entry ${i}`);
    assertEquals(a.baseIndex(i), b.baseIndex(i), `entry ${i}`);
  }
}

Deno.test("PackEntryTable from real packs", async (t) => {
  await using dir = await tempDir();
  const repo = `${dir.path}/repo`;
  await buildRepo(repo, { commits: 60, big: false });

  await t.step("accessors agree with git verify-pack -v, OFS_DELTA bases as indices", async () => {
    const pack = await packObjects(repo);
    const verified = await verifyPack(dir.path, "ofs", pack);
    const { index } = await scanPack(chunked(pack, { seed: 4, maxChunk: 8192 }));
    assertEquals(index.length, verified.length);
    assertEquals(index.dataEnd, pack.length - 20);
    assertEquals(index.refDeltas, 0);
    const idAt = new Map(verified.map((v, i) => [i, v.id]));
    let deltas = 0;
    verified.forEach((v, i) => {
      assertEquals(index.offset(i), v.offset);
      assertEquals(index.byteLength(i), v.sizeInPack);
      assertEquals(index.end(i), v.offset + v.sizeInPack);
      assertEquals(index.headerLength(i) + index.compressedLength(i), v.sizeInPack);
      assertEquals(index.size(i), v.size);
      assertEquals(index.indexOf(v.offset), i);
      assertEquals(index.indexOf(v.offset + 1), -1);
      if (index.type(i) === OBJ_OFS_DELTA) {
        deltas++;
        assert(index.baseIndex(i) < i);
        assertEquals(idAt.get(index.baseIndex(i)), v.baseId, `entry ${i}`);
      } else {
        assertEquals(index.baseIndex(i), -1);
        assertEquals(v.baseId, undefined);
      }
    });
    assert(deltas > 20, `fixture has deltas (${deltas})`);
    assertSameIndex(PackEntryTable.fromEntries(index.toArray()), index);
  });

  await t.step("REF_DELTA base ids live in the side map", async () => {
    const pack = await packObjects(repo, { ofsDelta: false });
    const verified = await verifyPack(dir.path, "ref", pack);
    const { index } = await scanPack(chunked(pack, [65536]));
    const refs = verified.filter((v) => v.baseId !== undefined);
    assert(refs.length > 20);
    assertEquals(index.refDeltas, refs.length);
    verified.forEach((v, i) => {
      assertEquals(index.baseId(i), v.baseId);
      assertEquals(index.baseIndex(i), -1);
      if (v.baseId) assertEquals(index.type(i), OBJ_REF_DELTA);
    });
    assertSameIndex(PackEntryTable.fromEntries(index.toArray()), index);
  });
});

Deno.test("PackEntryTable stores what it is given, or refuses", () => {
  const index = new PackEntryTable(3);
  index.push({ offset: 12, type: OBJ_BLOB, size: 2 ** 40, headerLength: 7, end: 100 });
  index.push({
    offset: 100,
    type: OBJ_OFS_DELTA,
    size: 5,
    headerLength: 3,
    end: 120,
    baseIndex: 0,
  });
  assertEquals(index.size(0), 2 ** 40, "sizes past 32 bits round-trip");
  assertEquals(index.entry(1).baseOffset, 12);
  assertEquals(index.compressedLength(1), 17);
  const bad = { type: OBJ_BLOB, size: 1, headerLength: 2 };
  assertThrows(() => index.push({ ...bad, offset: 121, end: 130 }), Error, /does not start at 120/);
  assertThrows(() => index.push({ ...bad, offset: 120, end: 130, headerLength: 32 }), RangeError);
  assertThrows(() => index.push({ ...bad, offset: 120, end: 121 }), Error, /before its data/);
  assertThrows(
    () => index.push({ ...bad, offset: 120, end: 130, baseIndex: 2 }),
    Error,
    /not an earlier/,
  );
  assertThrows(
    () => index.push({ ...bad, offset: 120, end: 130, size: -1 }),
    Error,
    /invalid size/,
  );
  assertThrows(() => index.offset(2), RangeError);
  assertThrows(() => index.type(-1), RangeError);
  index.push({ ...bad, offset: 120, end: 130 });
  assertEquals(index.length, 3);
  // Capacity stopped at the expected count; one side-map entry for the large size.
  assertEquals(index.bytesUsed(), 3 * 17 + 64);
  index.push({ ...bad, offset: 130, end: 140 });
  assertEquals(index.end(3), 140);
  assertEquals(index.dataEnd, 140);
});

Deno.test("200k tiny blobs: the index stays within 40 bytes per object, and splits", async () => {
  await using dir = await tempDir();
  const count = 200_000;
  const path = await tinyBlobPack(`${dir.path}/repo`, count);
  using file = await Deno.open(path);
  const summary = await scanPack(file.readable);
  const { index } = summary;
  assertEquals(index.length, count);
  const perObject = index.bytesUsed() / count;
  assert(perObject <= 40, `${perObject} bytes per object`);
  console.log(`    index ${index.bytesUsed()} bytes for ${count} objects (${perObject} B/object)`);

  const plan = planSplit(index, 2);
  assertEquals(plan.parts.map((p) => p.objects), [count / 2, count / 2]);
  using source = await Deno.open(path);
  const partPath = `${dir.path}/part0.pack`;
  const partFile = await Deno.open(partPath, { write: true, create: true });
  const rescan = packScanner();
  const rescanned = rescan.stream.readable.pipeTo(new WritableStream());
  const written = await splitPack(source.readable, summary, plan, [
    partFile.writable,
    rescan.stream.writable,
  ]);
  await rescanned;
  const second = await rescan.summary;
  assertEquals(second.objects, count / 2);
  assertEquals(second.checksum, written[1].hash);
  const verified = await git(["index-pack", partPath], { cwd: dir.path });
  assertMatch(verified, /^[0-9a-f]{40}\n$/);
  assertEquals(written[0].objects, count / 2);
});
