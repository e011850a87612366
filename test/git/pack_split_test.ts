import {
  assert,
  assertEquals,
  assertMatch,
  assertRejects,
  assertThrows,
} from "../support/assert.ts";
import {
  OBJ_BLOB,
  OBJ_OFS_DELTA,
  OBJ_REF_DELTA,
  type PackEntry,
  PackFormatError,
} from "../../src/git/pack.ts";
import { PackEntryTable } from "../../src/git/pack_entries.ts";
import { scanPack } from "../../src/git/pack_reader.ts";
import { planSplit, splitPack, splitPackBytes } from "../../src/git/pack_split.ts";
import { gitBytes, tempDir } from "../support/git.ts";
import { chunked } from "../support/streams.ts";
import { buildRepo, packObjects, verifyPack } from "../support/pack_fixtures.ts";

/** Synthetic entries: `spec[i]` is [bytes, base index or -1]. */
function entries(spec: [number, number][]): PackEntry[] {
  const out: PackEntry[] = [];
  let offset = 12;
  spec.forEach(([bytes, base], index) => {
    const entry: PackEntry = {
      index,
      offset,
      type: base < 0 ? OBJ_BLOB : OBJ_OFS_DELTA,
      size: bytes,
      headerLength: 2,
      compressedLength: bytes - 2,
      end: offset + bytes,
    };
    if (base >= 0) entry.baseOffset = out[base].offset;
    out.push(entry);
    offset += bytes;
  });
  return out;
}

Deno.test("planSplit keeps delta families together and balances them", () => {
  // Families: {0,2,5} = 600 bytes, {1,4} = 500, {3} = 100, {6} = 50.
  const list = entries([[100, -1], [300, -1], [200, 0], [100, -1], [200, 1], [300, 2], [50, -1]]);
  const plan = planSplit(PackEntryTable.fromEntries(list), 2);
  assertEquals(plan.families, 4);
  assertEquals(plan.parts.length, 2);
  const partOf = (i: number) => plan.assignment[i];
  assertEquals(partOf(0), partOf(2));
  assertEquals(partOf(2), partOf(5));
  assertEquals(partOf(1), partOf(4));
  assert(partOf(0) !== partOf(1), "objects 0 and 1 in different parts");
  assertEquals(plan.parts.map((p) => p.bytes).sort(), [600, 650]);
  assertEquals(plan.parts.map((p) => p.objects).sort(), [3, 4]);
  assertEquals(plan.note, undefined);

  const many = planSplit(PackEntryTable.fromEntries(list), 8);
  assertEquals(many.parts.length, 4, "never more parts than families");
  assert(many.parts.every((p) => p.objects > 0));
  assertMatch(many.note!, /only 4 delta families/);

  const one = planSplit(PackEntryTable.fromEntries(list), 1);
  assertEquals(one.parts, [{ objects: 7, bytes: 1250 }]);
  assert(one.assignment.every((p) => p === 0));

  const withRef = list.map((e) => ({ ...e }));
  withRef[4] = {
    ...withRef[4],
    type: OBJ_REF_DELTA,
    baseOffset: undefined,
    baseId: "ab".repeat(20),
  };
  const refPlan = planSplit(PackEntryTable.fromEntries(withRef), 4);
  assertEquals(refPlan.parts.length, 1);
  assertMatch(refPlan.note!, /REF_DELTA/);

  assertEquals(planSplit(new PackEntryTable(), 3).parts, [{ objects: 0, bytes: 0 }]);
  assertThrows(() => planSplit(PackEntryTable.fromEntries(list), 0), RangeError);
});

Deno.test("pack splitter", async (t) => {
  await using dir = await tempDir();
  const repo = `${dir.path}/repo`;
  await buildRepo(repo);
  const pack = await packObjects(repo);
  const original = await verifyPack(dir.path, "original", pack);
  const allIds = original.map((o) => o.id).sort();
  const summary = await scanPack(chunked(pack, [65536]));

  for (const parts of [1, 2, 3, 8]) {
    await t.step(
      `${parts} part(s): each passes index-pack and verify-pack; ids partition the input`,
      async () => {
        const outputs = await splitPackBytes(pack, parts);
        const plan = planSplit(summary.index, parts);
        assertEquals(outputs.length, Math.min(parts, plan.families));
        const ids: string[] = [];
        for (const [i, output] of outputs.entries()) {
          // index-pack fails on a delta whose base is not in the pack: each part is self-contained.
          const objects = await verifyPack(dir.path, `split${parts}-${i}`, output);
          assertEquals(objects.length, plan.parts[i].objects);
          assert(objects.length > 0);
          ids.push(...objects.map((o) => o.id));
        }
        assertEquals(ids.sort(), allIds, "union equals the input, with no duplicates");
        if (parts === 1) assertEquals(outputs[0], pack, "one part is the input, byte for byte");
        // Largest-first greedy bound: no part exceeds the mean by more than the largest family.
        const largestFamily = Math.max(
          ...planSplit(summary.index, 1e6).parts.map((p) => p.bytes),
        );
        const total = plan.parts.reduce((n, p) => n + p.bytes, 0);
        const biggest = Math.max(...plan.parts.map((p) => p.bytes));
        assert(biggest <= total / plan.parts.length + largestFamily);
        const sizes = outputs.map((o) => o.length);
        console.log(
          `    ${parts} parts: bytes max ${Math.max(...sizes)} min ${Math.min(...sizes)}`,
        );
      },
    );
  }

  await t.step("streams from chunked input into file sinks", async () => {
    const plan = planSplit(summary.index, 3);
    const files = await Promise.all(
      plan.parts.map((_, i) =>
        Deno.open(`${dir.path}/file-${i}.pack`, { write: true, create: true })
      ),
    );
    const results = await splitPack(
      chunked(pack, { seed: 3, maxChunk: 50_000 }),
      summary,
      plan,
      files.map((f) => f.writable),
    );
    const expected = await splitPackBytes(pack, 3);
    for (const [i, result] of results.entries()) {
      const written = await Deno.readFile(`${dir.path}/file-${i}.pack`);
      assertEquals(written, expected[i]);
      assertEquals(result.size, written.length);
      assertEquals(result.objects, plan.parts[i].objects);
      assertEquals(result.hash, (await scanPack(chunked(written, [1 << 20]))).checksum);
    }
  });

  await t.step("a REF_DELTA pack is kept whole and stays valid", async () => {
    const refPack = await packObjects(repo, { ofsDelta: false, revs: ["small"] });
    const refSummary = await scanPack(chunked(refPack, [4096]));
    assert(refSummary.entries.some((e) => e.type === OBJ_REF_DELTA));
    const plan = planSplit(refSummary.index, 4);
    assertEquals(plan.parts.length, 1);
    assertMatch(plan.note!, /REF_DELTA/);
    assertEquals(await splitPackBytes(refPack, 4), [refPack]);
  });

  await t.step("an empty pack splits into one empty pack", async () => {
    const empty = await gitBytes(["pack-objects", "--stdout"], {
      cwd: repo,
      stdin: new Uint8Array(0),
    });
    assertEquals(await splitPackBytes(empty, 3), [empty]);
  });

  await t.step("a plan that separates a delta from its base is refused", async () => {
    const plan = planSplit(summary.index, 2);
    const delta = summary.entries.findIndex((e) => e.type === OBJ_OFS_DELTA);
    const from = plan.assignment[delta];
    const to = 1 - from;
    plan.assignment[delta] = to;
    plan.parts[from].objects--;
    plan.parts[to].objects++;
    const sinks = plan.parts.map(() => new WritableStream<Uint8Array>());
    assertEquals(
      (await assertRejects(
        splitPack(chunked(pack, [65536]), summary, plan, sinks),
        PackFormatError,
      )).code,
      "bad-delta-base",
    );
  });

  await t.step("a source shorter than the scan fails and aborts every sink", async () => {
    const plan = planSplit(summary.index, 2);
    const aborted: unknown[] = [];
    const sinks = plan.parts.map(() =>
      new WritableStream<Uint8Array>({ abort: (reason) => void aborted.push(reason) })
    );
    assertEquals(
      (await assertRejects(
        splitPack(chunked(pack.subarray(0, pack.length - 30), [65536]), summary, plan, sinks),
        PackFormatError,
      )).code,
      "truncated",
    );
    assertEquals(aborted.length, 2);
  });
});

Deno.test("SHA-256 packs: scanned, split and accepted by git (OFS_DELTA and REF_DELTA)", async () => {
  await using dir = await tempDir();
  const repo = `${dir.path}/repo`;
  await buildRepo(repo, { commits: 40, big: false, objectFormat: "sha256" });
  for (const ofsDelta of [true, false]) {
    const pack = await packObjects(repo, { ofsDelta });
    const summary = await scanPack(chunked(pack, { seed: 5, maxChunk: 4096 }), {
      objectFormat: "sha256",
    });
    assertEquals(summary.objectFormat, "sha256");
    assertEquals(summary.checksum.length, 64);
    assertEquals(summary.size, pack.length);
    if (!ofsDelta) assert(summary.entries.some((e) => e.baseId?.length === 64), "REF_DELTA bases");
    // Read as SHA-1 the same bytes do not check out.
    await assertRejects(() => scanPack(chunked(pack, [65536])), PackFormatError);
    const original = await verifyPack(repo, `all-${ofsDelta}`, pack);
    const parts = await splitPackBytes(pack, 3, "sha256");
    // REF_DELTA packs stay whole (their bases are named by id), OFS_DELTA ones split.
    assertEquals(parts.length > 1, ofsDelta, "split into several packs");
    const ids: string[] = [];
    for (const [i, part] of parts.entries()) {
      const objects = await verifyPack(repo, `part-${ofsDelta}-${i}`, part);
      ids.push(...objects.map((o) => o.id));
      const scanned = await scanPack(chunked(part, [65536]), { objectFormat: "sha256" });
      assertEquals(scanned.checksum.length, 64);
    }
    assertEquals(ids.sort(), original.map((o) => o.id).sort(), "parts partition the pack");
  }
});
