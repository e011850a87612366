import { withinDeadline } from "../support/deadline.ts";
import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { bytesToHex } from "@noble/hashes/utils.js";
import { GitFormatError } from "../../src/git/errors.ts";
import {
  OBJ_OFS_DELTA,
  OBJ_REF_DELTA,
  OBJ_TAG,
  type PackEntry,
  PackFormatError,
  typeName,
} from "../../src/git/pack.ts";
import { packScanner, type PackSummary, scanPack } from "../../src/git/pack_reader.ts";
import { gitBytes, tempDir } from "../support/git.ts";
import { chunked, collect, concatBytes } from "../support/streams.ts";
import { SeededRandom } from "../support/random.ts";
import {
  buildRepo,
  packObjects,
  type VerifiedObject,
  verifyPack,
} from "../support/pack_fixtures.ts";

/** Asserts that a scan agrees with `git verify-pack -v` on every entry. */
function assertMatchesGit(
  pack: Uint8Array,
  summary: PackSummary,
  verified: VerifiedObject[],
): void {
  assertEquals(summary.version, 2);
  assertEquals(summary.objects, verified.length);
  assertEquals(summary.entries.length, verified.length);
  assertEquals(summary.size, pack.length);
  assertEquals(summary.checksum, bytesToHex(pack.subarray(pack.length - 20)));
  const idAt = new Map(verified.map((v) => [v.offset, v.id]));
  summary.entries.forEach((entry, i) => {
    const v = verified[i];
    const what = `entry ${i} (${v.id})`;
    assertEquals(entry.index, i, what);
    assertEquals(entry.offset, v.offset, what);
    assertEquals(entry.size, v.size, what);
    assertEquals(entry.headerLength + entry.compressedLength, v.sizeInPack, what);
    assertEquals(entry.end, entry.offset + v.sizeInPack, what);
    if (entry.type === OBJ_OFS_DELTA) {
      assertEquals(idAt.get(entry.baseOffset!), v.baseId, what);
    } else if (entry.type === OBJ_REF_DELTA) {
      assertEquals(entry.baseId, v.baseId, what);
    } else {
      assertEquals(typeName(entry.type), v.type, what);
      assertEquals(v.baseId, undefined, what);
    }
  });
}

async function expectPackError(
  bytes: Uint8Array,
  codes: string[],
  message?: RegExp,
): Promise<void> {
  const e = await assertRejects(
    scanPack(chunked(bytes, { seed: bytes.length, maxChunk: 4096 })),
    PackFormatError,
    message,
  );
  assert(codes.includes(e.code), `code ${e.code} (${e.message}) not in ${codes}`);
}

Deno.test("pack reader", async (t) => {
  await using dir = await tempDir();
  const repo = `${dir.path}/repo`;
  await buildRepo(repo);
  const packs = {
    ofs6: await packObjects(repo, { compression: 6 }),
    ref1: await packObjects(repo, { compression: 1, ofsDelta: false }),
    ofs0: await packObjects(repo, { compression: 0 }),
    ofs9: await packObjects(repo, { compression: 9 }),
    small: await packObjects(repo, { revs: ["small"] }),
  };

  await t.step("entries match git verify-pack -v exactly", async () => {
    for (const [name, pack] of Object.entries(packs)) {
      const verified = await verifyPack(dir.path, name, pack);
      const summary = await scanPack(chunked(pack, { seed: 1, maxChunk: 256 * 1024 }));
      assertMatchesGit(pack, summary, verified);
      if (name === "small") continue;
      // The fixture really has what it is meant to exercise.
      assert(Math.max(...verified.map((v) => v.depth ?? 0)) >= 20, `${name}: deep chains`);
      assert(summary.entries.some((e) => e.compressedLength > 1_500_000), `${name}: big blob`);
      assert(summary.entries.some((e) => e.size === 0), `${name}: empty blob`);
      assertEquals(summary.entries.filter((e) => e.type === OBJ_TAG).length, 3);
      const deltaType = name === "ref1" ? OBJ_REF_DELTA : OBJ_OFS_DELTA;
      assert(summary.entries.filter((e) => e.type === deltaType).length > 50, name);
    }
  });

  const whole = await scanPack(chunked(packs.small, [packs.small.length]));
  await t.step("bytewise and seeded random chunking give the same entries", async () => {
    assertEquals(await scanPack(chunked(packs.small, "bytewise")), whole);
    for (let seed = 1; seed <= 5; seed++) {
      assertEquals(await scanPack(chunked(packs.small, { seed, maxChunk: 64 })), whole);
    }
    const big = await scanPack(chunked(packs.ofs6, [packs.ofs6.length]));
    for (let seed = 1; seed <= 2; seed++) {
      const plan = { seed, maxChunk: 100_000 };
      assertEquals(await scanPack(chunked(packs.ofs6, plan)), big);
    }
  });

  await t.step("packScanner passes bytes through unchanged while scanning", async () => {
    const scanner = packScanner();
    const out = await collect(
      chunked(packs.ofs9, { seed: 9, maxChunk: 10_000 }).pipeThrough(scanner.stream),
    );
    assertEquals(out, packs.ofs9);
    assertEquals(await scanner.summary, await scanPack(chunked(packs.ofs9, [1 << 20])));
  });

  await t.step("onEntry streams entries; keepEntries: false keeps none", async () => {
    const seen: PackEntry[] = [];
    const summary = await scanPack(chunked(packs.small, [1000]), {
      keepEntries: false,
      onEntry: (e) => seen.push(e),
    });
    assertEquals(summary.entries, []);
    assertEquals(summary.objects, whole.objects);
    assertEquals(seen, whole.entries);
  });

  await t.step("malformed packs are rejected with typed errors", async () => {
    const small = packs.small;
    const mutate = (f: (b: Uint8Array) => void) => {
      const copy = small.slice();
      f(copy);
      return copy;
    };
    await expectPackError(mutate((b) => (b[0] = 0x58)), ["bad-signature"], /PACK signature/);
    await expectPackError(mutate((b) => (b[7] = 3)), ["bad-version"], /version 3/);
    await expectPackError(small.subarray(0, 5), ["truncated"], /pack header/);
    const e5 = whole.entries[5];
    await expectPackError(
      small.subarray(0, e5.offset + e5.headerLength + 3),
      ["truncated"],
      /entry 5/,
    );
    await expectPackError(small.subarray(0, small.length - 7), ["truncated"], /trailer/);
    await expectPackError(mutate((b) => (b[b.length - 1] ^= 1)), ["bad-checksum"], /trailer/);
    await expectPackError(concatBytes([small, Uint8Array.of(0)]), ["trailing-data"]);
    await expectPackError(mutate((b) => b[11]++), [
      "truncated",
      "bad-zlib",
      "bad-type",
      "bad-header",
    ]);
    await expectPackError(mutate((b) => b[11]--), ["bad-checksum"]);
    const big = whole.entries.find((e) => e.compressedLength > 200)!;
    await expectPackError(
      mutate((b) => (b[big.offset + big.headerLength + 100] ^= 0x10)),
      ["bad-zlib", "size-mismatch", "bad-checksum"],
    );
    await expectPackError(
      mutate((b) => (b[big.offset] = (b[big.offset] & 0x8f) | (5 << 4))),
      ["bad-type"],
      /invalid type 5/,
    );
    // An OFS_DELTA whose base distance is off by one: not the start of an entry.
    const ofs = whole.entries.find((e) => e.type === OBJ_OFS_DELTA)!;
    await expectPackError(
      mutate((b) => (b[ofs.offset + ofs.headerLength - 1] ^= 1)),
      ["bad-delta-base"],
      /not the start of an earlier entry/,
    );
  });

  await t.step("an empty pack from git scans to zero entries", async () => {
    const empty = await gitBytes(["pack-objects", "--stdout"], {
      cwd: repo,
      stdin: new Uint8Array(0),
    });
    const summary = await scanPack(chunked(empty, "bytewise"));
    assertEquals(
      [summary.objects, summary.entries, summary.size],
      [0, [], 32],
    );
    assertEquals(summary.checksum, bytesToHex(empty.subarray(12)));
  });

  await t.step("packScanner fails the stream and the summary alike", async () => {
    const bad = packs.small.slice(0, packs.small.length - 1);
    const scanner = packScanner();
    await assertRejects(
      collect(chunked(bad, [4096]).pipeThrough(scanner.stream)),
      PackFormatError,
    );
    assertEquals(
      (await assertRejects(scanner.summary, PackFormatError)).code,
      "truncated",
    );
  });

  await t.step(
    "random mutations always end in a GitFormatError, never a hang or crash",
    async () => {
      const small = packs.small;
      let rejected = 0;
      for (let seed = 1; seed <= 300; seed++) {
        const rand = new SeededRandom(seed);
        let bytes = small.slice();
        const kind = seed % 3;
        if (kind === 0) bytes = bytes.subarray(0, Math.floor(rand.float() * bytes.length));
        const flips = kind === 0 ? 0 : 1 + Math.floor(rand.float() * 3);
        for (let k = 0; k < flips; k++) {
          bytes[Math.floor(rand.float() * bytes.length)] ^= 1 +
            Math.floor(rand.float() * 255);
        }
        try {
          await withinDeadline(scanPack(chunked(bytes, { seed, maxChunk: 512 })), `seed ${seed}`);
        } catch (error) {
          if (!(error instanceof GitFormatError)) throw error;
          rejected++;
        }
      }
      // Every byte is covered by the trailer, so every mutation must be caught.
      assertEquals(rejected, 300);
    },
  );
});
