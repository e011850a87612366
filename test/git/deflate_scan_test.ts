import { assert, assertEquals, assertThrows } from "../support/assert.ts";
import { unzlibSync, zlibSync } from "fflate";
import { DeflateScanner, ZlibFormatError } from "../../src/git/deflate_scan.ts";
import { GitFormatError } from "../../src/git/errors.ts";
import { git, tempDir } from "../support/git.ts";
import { concatBytes } from "../support/streams.ts";
import { SeededRandom } from "../support/random.ts";
import { randomText } from "../support/pack_fixtures.ts";

const encoder = new TextEncoder();

/** Feeds `input` in pieces of the given sizes until the stream ends; returns the end index. */
function scanInPieces(input: Uint8Array, sizes: number[]): { end: number; s: DeflateScanner } {
  const s = new DeflateScanner();
  let at = 0;
  for (const size of sizes) {
    const stop = Math.min(at + size, input.length);
    const end = s.scan(input, at, stop);
    if (s.done) return { end, s };
    assertEquals(end, stop, "an unfinished scan consumes all it is given");
    at = stop;
  }
  return { end: at, s };
}

const samples: [string, Uint8Array][] = [
  ["empty", new Uint8Array(0)],
  ["one byte", Uint8Array.of(42)],
  ["short text", encoder.encode("hello hello hello world\n")],
  ["text", encoder.encode(randomText(300_000, 3))],
  ["random", new SeededRandom(4).bytes(200_000)],
  ["runs", new Uint8Array(100_000).fill(7)],
  [
    "mixed",
    concatBytes([
      encoder.encode(randomText(70_000, 5)),
      new SeededRandom(6).bytes(70_000),
      encoder.encode(randomText(70_000, 7)),
    ]),
  ],
];

Deno.test("scanner finds the exact end and inflated size of fflate streams at all levels", () => {
  for (const [name, data] of samples) {
    for (const level of [0, 1, 4, 6, 9] as const) {
      const z = zlibSync(data, { level });
      // Bytes after the stream (the next pack entry) must be left alone.
      const input = concatBytes([z, Uint8Array.of(0x78, 0x9c, 0xbe, 0xef)]);
      const s = new DeflateScanner();
      const end = s.scan(input);
      const what = `${name} at level ${level}`;
      assert(s.done, what);
      assertEquals(end, z.length, what);
      assertEquals(s.compressedLength, z.length, what);
      assertEquals(s.inflatedLength, data.length, what);
      assertEquals(s.scan(input, end), end, "a finished scanner consumes nothing more");
    }
  }
});

Deno.test("scanner resumes at every split point and bytewise", () => {
  const data = encoder.encode(randomText(3000, 11) + "abcabcabcabc".repeat(40));
  for (const level of [0, 1, 9] as const) {
    const z = zlibSync(data, { level });
    const input = concatBytes([z, new Uint8Array(8)]);
    for (let cut = 0; cut <= input.length; cut++) {
      const { end, s } = scanInPieces(input, [cut, input.length]);
      assertEquals(
        [s.done, end, s.compressedLength, s.inflatedLength],
        [true, z.length, z.length, data.length],
        `level ${level}, cut at ${cut}`,
      );
    }
    const { end, s } = scanInPieces(input, new Array(input.length).fill(1));
    assertEquals([s.done, end, s.inflatedLength], [true, z.length, data.length]);
  }
});

Deno.test("scanner handles seeded random chunking of large streams and can be reused", () => {
  const s = new DeflateScanner();
  for (const [name, data] of samples.slice(3)) {
    const z = zlibSync(data, { level: 6 });
    const rand = new SeededRandom(z.length);
    s.reset();
    let at = 0;
    while (!s.done) {
      assert(at < z.length, `${name}: stream ended early`);
      const stop = Math.min(z.length, at + 1 + Math.floor(rand.float() * 5000));
      at = s.scan(z, at, stop);
    }
    assertEquals([at, s.compressedLength, s.inflatedLength], [z.length, z.length, data.length]);
  }
});

Deno.test("scanner agrees with git's own zlib streams (loose objects)", async () => {
  await using dir = await tempDir();
  await git(["init", "-q", dir.path]);
  const contents = [
    new Uint8Array(0),
    encoder.encode(randomText(50_000, 21)),
    new SeededRandom(22).bytes(300_000),
  ];
  for (const [level, content] of contents.flatMap((c) => [0, 1, 9].map((l) => [l, c] as const))) {
    const file = `${dir.path}/content`;
    await Deno.writeFile(file, content);
    const id = (await git(["-c", `core.compression=${level}`, "hash-object", "-w", file], {
      cwd: dir.path,
    })).trim();
    const loose = await Deno.readFile(`${dir.path}/.git/objects/${id.slice(0, 2)}/${id.slice(2)}`);
    const s = new DeflateScanner();
    assertEquals(s.scan(loose), loose.length);
    assert(s.done);
    const header = `blob ${content.length}\0`.length;
    assertEquals(s.inflatedLength, header + content.length, `level ${level}`);
    assertEquals(unzlibSync(loose).length, s.inflatedLength);
    await Deno.remove(`${dir.path}/.git/objects/${id.slice(0, 2)}`, { recursive: true });
  }
});

/** Writes DEFLATE bit fields (LSB first) and Huffman codes (MSB first). */
class BitWriter {
  bytes: number[] = [];
  #bit = 0;
  bits(value: number, count: number): this {
    for (let i = 0; i < count; i++) this.#push((value >>> i) & 1);
    return this;
  }
  code(value: number, count: number): this {
    for (let i = count - 1; i >= 0; i--) this.#push((value >>> i) & 1);
    return this;
  }
  done(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
  #push(bit: number): void {
    if (this.#bit === 0) this.bytes.push(0);
    this.bytes[this.bytes.length - 1] |= bit << this.#bit;
    this.#bit = (this.#bit + 1) & 7;
  }
}

function assertBadZlib(input: Uint8Array, message: RegExp): void {
  const error = assertThrows(() => new DeflateScanner().scan(input), ZlibFormatError, message);
  assert(error instanceof GitFormatError);
  assertEquals(error.code, "bad-zlib");
}

Deno.test("scanner rejects malformed streams with ZlibFormatError", () => {
  assertBadZlib(Uint8Array.of(0x77, 0x9c, 0, 0), /unknown method/);
  assertBadZlib(Uint8Array.of(0x78, 0x9d, 0, 0), /header check/);
  assertBadZlib(Uint8Array.of(0x78, 0xbb, 0, 0), /preset dictionary/);
  assertBadZlib(Uint8Array.of(0x88, 0x98, 0, 0), /window size/);
  // BFINAL=1, BTYPE=3.
  assertBadZlib(
    concatBytes([Uint8Array.of(0x78, 0x01), new BitWriter().bits(7, 3).done()]),
    /block type/,
  );
  // Stored block whose NLEN is not the complement of LEN.
  assertBadZlib(Uint8Array.of(0x78, 0x01, 0x01, 0x05, 0x00, 0xfa, 0xfe), /stored block length/);
  // Fixed block starting with a match (length 3, distance 1) before any output.
  const farBack = new BitWriter().bits(1, 1).bits(1, 2).code(1, 7).code(0, 5).bits(0, 16);
  assertBadZlib(concatBytes([Uint8Array.of(0x78, 0x01), farBack.done()]), /too far back/);
  // Fixed block using reserved distance symbol 30.
  const badDistance = new BitWriter().bits(1, 1).bits(1, 2).code(0x30, 8).code(1, 7).code(30, 5)
    .bits(0, 16);
  assertBadZlib(concatBytes([Uint8Array.of(0x78, 0x01), badDistance.done()]), /distance symbol/);
  // Dynamic block whose code-length code is over-subscribed (all 19 lengths are 1).
  const overSubscribed = new BitWriter().bits(1, 1).bits(2, 2).bits(0, 5).bits(0, 5).bits(15, 4);
  for (let i = 0; i < 19; i++) overSubscribed.bits(1, 3);
  assertBadZlib(
    concatBytes([Uint8Array.of(0x78, 0x01), overSubscribed.bits(0, 32).done()]),
    /over-subscribed/,
  );
});

Deno.test("random corruption ends in ZlibFormatError or a (wrong) scan, never a hang or crash", () => {
  const data = encoder.encode(randomText(4000, 31));
  const streams = [
    zlibSync(data, { level: 1 }),
    zlibSync(data, { level: 9 }),
    zlibSync(data, { level: 0 }),
  ];
  let rejected = 0;
  let runs = 0;
  for (const stream of streams) {
    for (let seed = 1; seed <= 300; seed++) {
      const rand = new SeededRandom(seed);
      const input = concatBytes([stream, new Uint8Array(64)]);
      const flips = 1 + Math.floor(rand.float() * 4);
      for (let k = 0; k < flips; k++) {
        input[Math.floor(rand.float() * stream.length)] ^= 1 << Math.floor(rand.float() * 8);
      }
      const s = new DeflateScanner();
      runs++;
      try {
        // Synchronous, so no timer could interrupt a hang: every call must make progress or
        // finish, and the input bounds the number of calls.
        let at = 0;
        while (!s.done && at < input.length) {
          const next = s.scan(
            input,
            at,
            Math.min(input.length, at + 1 + Math.floor(rand.float() * 300)),
          );
          assert(next > at || s.done, `seed ${seed}: scan made no progress at ${at}`);
          at = next;
        }
      } catch (error) {
        if (!(error instanceof ZlibFormatError)) throw error;
        rejected++;
      }
    }
  }
  // Flips inside literal codes, stored data or the Adler-32 are structurally valid and only
  // an inflating consumer can catch them; header, block and length fields are caught here.
  assert(rejected > runs / 10, `only ${rejected} of ${runs} corruptions detected`);
});
