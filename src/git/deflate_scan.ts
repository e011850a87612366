/**
 * A resumable zlib/DEFLATE *scanner*: it walks a zlib stream (RFC 1950 wrapper around RFC 1951
 * DEFLATE data) without producing any output, to learn two things a pack reader needs and no
 * inflater reports:
 *
 * - exactly how many compressed bytes the stream occupies (pack entries do not record it), and
 * - how many bytes it would inflate to (to check against the entry header).
 *
 * Every symbol is decoded with table-driven Huffman lookups, but back-references are only
 * counted, never copied, so no window or output buffer exists.
 *
 * The scanner is a state machine fed with arbitrary chunks: when the bits needed for the next
 * step (a Huffman symbol together with its extra bits, a header field, ...) are not all
 * available it keeps them in its bit buffer and returns, and continues when fed more. Every
 * bit held at such a pause belongs to the pending step, so the stream's end is always found
 * exactly inside the chunk that holds it.
 *
 * Trade-off: the Adler-32 trailer is read but not verified, because that needs the inflated
 * bytes. Structural corruption (bad block types, invalid codes, distances reaching before the
 * start, stored-length mismatches) is still detected, and a pack's consumer (e.g. the client's
 * `git index-pack`) inflates and hashes every object anyway.
 *
 * @module
 */

import { GitFormatError } from "./errors.ts";

/** Malformed zlib or DEFLATE data (code `"bad-zlib"`). */
export class ZlibFormatError extends GitFormatError {
  override name = "ZlibFormatError";
  constructor(message: string) {
    super("bad-zlib", `invalid zlib stream: ${message}`);
  }
}

// Scanner states.
const S_ZLIB_HEADER = 0;
const S_BLOCK_HEADER = 1;
const S_STORED_HEADER = 2;
const S_STORED_COPY = 3;
const S_DYNAMIC_HEADER = 4;
const S_CODE_LENGTH_LENGTHS = 5;
const S_CODE_LENGTHS = 6;
const S_LITLEN = 7;
const S_DISTANCE = 8;
const S_DISTANCE_EXTRA = 9;
const S_ADLER = 10;
const S_DONE = 11;

/** Root (first-level) table sizes in bits; longer codes go through a second-level table. */
const LIT_ROOT = 9;
const DIST_ROOT = 7;
const CL_ROOT = 7;
const MAX_BITS = 15;

/*
 * Table entry layout (Int32):
 *   leaf:    symbol << 8 | codeLength          (codeLength 1..15)
 *   link:    subtableStart << 8 | 16 | subBits (only in root tables)
 *   invalid: 0                                  (no code has these bits)
 */
const LINK = 16;

// deno-fmt-ignore
const LENGTH_BASE = new Uint16Array([
  3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
  163, 195, 227, 258,
]);
// deno-fmt-ignore
const LENGTH_EXTRA = new Uint8Array([
  0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
]);
// deno-fmt-ignore
const DIST_BASE = new Uint16Array([
  1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
  2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
]);
// deno-fmt-ignore
const DIST_EXTRA = new Uint8Array([
  0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
  13,
]);
/** Order in which code-length code lengths are transmitted (RFC 1951 §3.2.7). */
// deno-fmt-ignore
const CODE_LENGTH_ORDER = new Uint8Array([
  16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
]);

/** Worst-case table sizes: the root table plus one subtable per code longer than the root. */
const LIT_TABLE_SIZE = (1 << LIT_ROOT) + 288 * (1 << (MAX_BITS - LIT_ROOT));
const DIST_TABLE_SIZE = (1 << DIST_ROOT) + 32 * (1 << (MAX_BITS - DIST_ROOT));

/**
 * Builds a two-level decoding table for a canonical Huffman code into `table`, indexed by the
 * next stream bits (least significant first). Throws on over-subscribed codes; incomplete codes
 * are accepted only when `allowIncomplete` and at most one code is present (as zlib does).
 */
function buildTable(
  lengths: Uint8Array,
  start: number,
  count: number,
  table: Int32Array,
  rootBits: number,
  allowIncomplete: boolean,
  what: string,
): void {
  const lengthCount = new Uint16Array(MAX_BITS + 1);
  let maxLength = 0;
  for (let i = 0; i < count; i++) {
    const len = lengths[start + i];
    lengthCount[len]++;
    if (len > maxLength) maxLength = len;
  }
  lengthCount[0] = 0;
  let left = 1;
  let codes = 0;
  for (let len = 1; len <= MAX_BITS; len++) {
    left = (left << 1) - lengthCount[len];
    codes += lengthCount[len];
    if (left < 0) throw new ZlibFormatError(`over-subscribed ${what} code`);
  }
  if (left > 0 && !(allowIncomplete && codes <= 1)) {
    throw new ZlibFormatError(`incomplete ${what} code`);
  }
  const nextCode = new Uint16Array(MAX_BITS + 2);
  for (let len = 1, code = 0; len <= MAX_BITS; len++) {
    code = (code + lengthCount[len - 1]) << 1;
    nextCode[len] = code;
  }
  const rootSize = 1 << rootBits;
  table.fill(0, 0, rootSize);
  const subBits = maxLength > rootBits ? maxLength - rootBits : 0;
  let nextSubtable = rootSize;
  for (let symbol = 0; symbol < count; symbol++) {
    const len = lengths[start + symbol];
    if (len === 0) continue;
    const reversed = reverseBits(nextCode[len]++, len);
    if (len <= rootBits) {
      const leaf = (symbol << 8) | len;
      for (let i = reversed; i < rootSize; i += 1 << len) table[i] = leaf;
      continue;
    }
    const prefix = reversed & (rootSize - 1);
    let link = table[prefix];
    if ((link & LINK) === 0) {
      link = (nextSubtable << 8) | LINK | subBits;
      table[prefix] = link;
      table.fill(0, nextSubtable, nextSubtable + (1 << subBits));
      nextSubtable += 1 << subBits;
    }
    const base = link >>> 8;
    const leaf = (symbol << 8) | len;
    const step = 1 << (len - rootBits);
    for (let i = reversed >>> rootBits; i < 1 << subBits; i += step) table[base + i] = leaf;
  }
}

function reverseBits(code: number, length: number): number {
  let out = 0;
  for (let i = 0; i < length; i++) {
    out = (out << 1) | (code & 1);
    code >>>= 1;
  }
  return out;
}

/** Decoding tables for the fixed Huffman codes (block type 1); immutable once built. */
interface FixedTables {
  readonly lit: Int32Array;
  readonly dist: Int32Array;
}

function buildFixedTables(): FixedTables {
  const lengths = new Uint8Array(288 + 32);
  lengths.fill(8, 0, 144);
  lengths.fill(9, 144, 256);
  lengths.fill(7, 256, 280);
  lengths.fill(8, 280, 288);
  lengths.fill(5, 288, 320);
  const lit = new Int32Array(LIT_TABLE_SIZE);
  const dist = new Int32Array(DIST_TABLE_SIZE);
  buildTable(lengths, 0, 288, lit, LIT_ROOT, false, "fixed literal/length");
  buildTable(lengths, 288, 32, dist, DIST_ROOT, false, "fixed distance");
  return { lit, dist };
}

/** Constant lookup tables shared by all scanners (pure data, never mutated after creation). */
const FIXED: FixedTables = buildFixedTables();

/**
 * Resumable scanner for one zlib stream. Feed it bytes with {@link DeflateScanner.scan} until
 * {@link DeflateScanner.done}; then {@link DeflateScanner.compressedLength} and
 * {@link DeflateScanner.inflatedLength} describe the stream. Call {@link DeflateScanner.reset}
 * to reuse it (and its tables) for the next stream.
 */
export class DeflateScanner {
  #state = S_ZLIB_HEADER;
  #bitBuffer = 0;
  #bitCount = 0;
  #inflated = 0;
  #consumed = 0;
  #finalBlock = false;
  #storedLeft = 0;
  #literalCount = 0;
  #distanceCount = 0;
  #codeLengthCount = 0;
  #lengthIndex = 0;
  #pendingLength = 0;
  #pendingDistance = 0;
  readonly #lengths = new Uint8Array(288 + 32);
  readonly #codeLengthTable = new Int32Array(1 << CL_ROOT);
  readonly #dynamicLit = new Int32Array(LIT_TABLE_SIZE);
  readonly #dynamicDist = new Int32Array(DIST_TABLE_SIZE);
  #lit: Int32Array = FIXED.lit;
  /** Set when a step needs more input than the current chunk holds. */
  #starved = false;
  #dist: Int32Array = FIXED.dist;

  /** True once the whole stream, including its Adler-32 trailer, has been consumed. */
  get done(): boolean {
    return this.#state === S_DONE;
  }

  /** Compressed bytes consumed so far (the stream's exact length once {@link done}). */
  get compressedLength(): number {
    return this.#consumed;
  }

  /** Bytes the data inflates to so far (the full inflated size once {@link done}). */
  get inflatedLength(): number {
    return this.#inflated;
  }

  /** Prepares the scanner for a new stream. */
  reset(): void {
    this.#state = S_ZLIB_HEADER;
    this.#bitBuffer = 0;
    this.#bitCount = 0;
    this.#inflated = 0;
    this.#consumed = 0;
    this.#finalBlock = false;
    this.#storedLeft = 0;
    this.#pendingLength = 0;
    this.#pendingDistance = 0;
    this.#starved = false;
  }

  /**
   * Scans `input[start, end)`. Returns the index just past the last byte belonging to the
   * stream: `end` if the stream continues beyond this chunk, or the exact end of the stream
   * (then {@link done} is true; the remaining bytes belong to whatever follows).
   * Throws {@link ZlibFormatError} on malformed data.
   */
  scan(input: Uint8Array, start = 0, end: number = input.length): number {
    let pos = start;
    for (;;) {
      const state = this.#state;
      if (state === S_DONE) break;
      pos = state >= S_LITLEN && state <= S_DISTANCE_EXTRA
        ? this.#scanCodes(input, pos, end)
        : this.#scanStructure(input, pos, end);
      if (this.#starved) {
        this.#starved = false;
        break;
      }
    }
    this.#consumed += pos - start;
    return pos;
  }

  /**
   * The hot loop: Huffman-coded literals, lengths and distances. Returns on end of block
   * (state changes) or when the input runs short (sets `#starved`).
   */
  #scanCodes(input: Uint8Array, pos: number, end: number): number {
    let bits = this.#bitBuffer;
    let count = this.#bitCount;
    let state = this.#state;
    let out = this.#inflated;
    let pendingLength = this.#pendingLength;
    let pendingDistance = this.#pendingDistance;
    const lit = this.#lit;
    const dist = this.#dist;
    loop: for (;;) {
      while (count <= 24 && pos < end) {
        bits |= input[pos++] << count;
        count += 8;
      }
      if (state === S_LITLEN) {
        let entry = lit[bits & ((1 << LIT_ROOT) - 1)];
        if (entry & LINK) {
          entry = lit[(entry >>> 8) + ((bits >>> LIT_ROOT) & ((1 << (entry & 15)) - 1))];
        }
        const len = entry & 15;
        if (len === 0 || len > count) {
          if (count >= MAX_BITS) throw new ZlibFormatError("invalid literal/length code");
          this.#starved = true;
          break;
        }
        const symbol = entry >>> 8;
        if (symbol < 256) {
          bits = (bits >>> len) | 0;
          count -= len;
          out++;
          continue;
        }
        if (symbol === 256) {
          bits = (bits >>> len) | 0;
          count -= len;
          if (this.#finalBlock) {
            // The Adler-32 trailer starts at the next byte boundary.
            bits = (bits >>> (count & 7)) | 0;
            count -= count & 7;
            state = S_ADLER;
          } else {
            state = S_BLOCK_HEADER;
          }
          break;
        }
        const index = symbol - 257;
        if (index >= 29) throw new ZlibFormatError("invalid literal/length symbol");
        const extra = LENGTH_EXTRA[index];
        if (len + extra > count) {
          this.#starved = true;
          break;
        }
        pendingLength = LENGTH_BASE[index] + ((bits >>> len) & ((1 << extra) - 1));
        bits = (bits >>> (len + extra)) | 0;
        count -= len + extra;
        state = S_DISTANCE;
        continue;
      }
      if (state === S_DISTANCE) {
        let entry = dist[bits & ((1 << DIST_ROOT) - 1)];
        if (entry & LINK) {
          entry = dist[(entry >>> 8) + ((bits >>> DIST_ROOT) & ((1 << (entry & 15)) - 1))];
        }
        const len = entry & 15;
        if (len === 0 || len > count) {
          if (count >= MAX_BITS) throw new ZlibFormatError("invalid distance code");
          this.#starved = true;
          break loop;
        }
        const symbol = entry >>> 8;
        if (symbol >= 30) throw new ZlibFormatError("invalid distance symbol");
        bits = (bits >>> len) | 0;
        count -= len;
        pendingDistance = symbol;
        state = S_DISTANCE_EXTRA;
        while (count <= 24 && pos < end) {
          bits |= input[pos++] << count;
          count += 8;
        }
      }
      const extra = DIST_EXTRA[pendingDistance];
      if (extra > count) {
        this.#starved = true;
        break;
      }
      const distance = DIST_BASE[pendingDistance] + (bits & ((1 << extra) - 1));
      if (distance > out) throw new ZlibFormatError("distance too far back");
      bits = (bits >>> extra) | 0;
      count -= extra;
      out += pendingLength;
      state = S_LITLEN;
    }
    this.#bitBuffer = bits;
    this.#bitCount = count;
    this.#state = state;
    this.#inflated = out;
    this.#pendingLength = pendingLength;
    this.#pendingDistance = pendingDistance;
    return pos;
  }

  /**
   * Everything but coded data: zlib header, block headers, stored blocks, dynamic table
   * definitions and the trailer. Returns when coded data starts, at the end of the stream, or
   * when the input runs short (sets `#starved`).
   */
  #scanStructure(input: Uint8Array, pos: number, end: number): number {
    let bits = this.#bitBuffer;
    let count = this.#bitCount;
    let state = this.#state;
    let out = this.#inflated;
    outer: for (;;) {
      // Top up the bit buffer to at least 25 bits (up to 32) when input allows.
      while (count <= 24 && pos < end) {
        bits |= input[pos++] << count;
        count += 8;
      }
      switch (state) {
        case S_ZLIB_HEADER: {
          if (count < 16) {
            this.#starved = true;
            break outer;
          }
          const cmf = bits & 0xff;
          const flg = (bits >>> 8) & 0xff;
          if ((cmf & 15) !== 8) throw new ZlibFormatError(`unknown method ${cmf & 15}`);
          if (cmf >>> 4 > 7) throw new ZlibFormatError(`window size ${cmf >>> 4} too large`);
          if ((cmf * 256 + flg) % 31 !== 0) throw new ZlibFormatError("header check failed");
          if (flg & 0x20) throw new ZlibFormatError("preset dictionary not supported");
          bits = (bits >>> 16) | 0;
          count -= 16;
          state = S_BLOCK_HEADER;
          continue;
        }
        case S_BLOCK_HEADER: {
          if (count < 3) {
            this.#starved = true;
            break outer;
          }
          this.#finalBlock = (bits & 1) === 1;
          const type = (bits >>> 1) & 3;
          bits = (bits >>> 3) | 0;
          count -= 3;
          if (type === 0) {
            bits = (bits >>> (count & 7)) | 0;
            count -= count & 7;
            state = S_STORED_HEADER;
          } else if (type === 1) {
            this.#lit = FIXED.lit;
            this.#dist = FIXED.dist;
            state = S_LITLEN;
            break outer;
          } else if (type === 2) {
            state = S_DYNAMIC_HEADER;
          } else {
            throw new ZlibFormatError("invalid block type 3");
          }
          continue;
        }
        case S_STORED_HEADER: {
          if (count < 32) {
            this.#starved = true;
            break outer;
          }
          const length = bits & 0xffff;
          const complement = bits >>> 16;
          if ((length ^ 0xffff) !== complement) {
            throw new ZlibFormatError("stored block length mismatch");
          }
          bits = 0;
          count = 0;
          this.#storedLeft = length;
          state = S_STORED_COPY;
          continue;
        }
        case S_STORED_COPY: {
          // Whole bytes already pulled into the bit buffer come first.
          while (this.#storedLeft > 0 && count >= 8) {
            bits = (bits >>> 8) | 0;
            count -= 8;
            this.#storedLeft--;
            out++;
          }
          const skip = Math.min(this.#storedLeft, end - pos);
          pos += skip;
          out += skip;
          this.#storedLeft -= skip;
          if (this.#storedLeft > 0) {
            this.#starved = true;
            break outer;
          }
          state = this.#finalBlock ? S_ADLER : S_BLOCK_HEADER;
          continue;
        }
        case S_DYNAMIC_HEADER: {
          if (count < 14) {
            this.#starved = true;
            break outer;
          }
          this.#literalCount = (bits & 31) + 257;
          this.#distanceCount = ((bits >>> 5) & 31) + 1;
          this.#codeLengthCount = ((bits >>> 10) & 15) + 4;
          bits = (bits >>> 14) | 0;
          count -= 14;
          if (this.#literalCount > 286 || this.#distanceCount > 30) {
            throw new ZlibFormatError("too many length or distance symbols");
          }
          this.#lengths.fill(0, 0, 19);
          this.#lengthIndex = 0;
          state = S_CODE_LENGTH_LENGTHS;
          continue;
        }
        case S_CODE_LENGTH_LENGTHS: {
          while (this.#lengthIndex < this.#codeLengthCount) {
            while (count <= 24 && pos < end) {
              bits |= input[pos++] << count;
              count += 8;
            }
            if (count < 3) {
              this.#starved = true;
              break outer;
            }
            this.#lengths[CODE_LENGTH_ORDER[this.#lengthIndex++]] = bits & 7;
            bits = (bits >>> 3) | 0;
            count -= 3;
          }
          buildTable(this.#lengths, 0, 19, this.#codeLengthTable, CL_ROOT, false, "code length");
          this.#lengthIndex = 0;
          state = S_CODE_LENGTHS;
          continue;
        }
        case S_CODE_LENGTHS: {
          const total = this.#literalCount + this.#distanceCount;
          const lengths = this.#lengths;
          const table = this.#codeLengthTable;
          let index = this.#lengthIndex;
          while (index < total) {
            if (count < 14 && pos < end) {
              while (count <= 24 && pos < end) {
                bits |= input[pos++] << count;
                count += 8;
              }
            }
            const entry = table[bits & ((1 << CL_ROOT) - 1)];
            const len = entry & 15;
            if (len === 0 || len > count) {
              this.#lengthIndex = index;
              if (count >= CL_ROOT) throw new ZlibFormatError("invalid code length code");
              this.#starved = true;
              break outer;
            }
            const symbol = entry >>> 8;
            if (symbol < 16) {
              lengths[index++] = symbol;
              bits = (bits >>> len) | 0;
              count -= len;
              continue;
            }
            const extra = symbol === 16 ? 2 : symbol === 17 ? 3 : 7;
            if (len + extra > count) {
              this.#lengthIndex = index;
              this.#starved = true;
              break outer;
            }
            const repeat = (bits >>> len) & ((1 << extra) - 1);
            bits = (bits >>> (len + extra)) | 0;
            count -= len + extra;
            let value = 0;
            let times: number;
            if (symbol === 16) {
              if (index === 0) throw new ZlibFormatError("repeat with no previous length");
              value = lengths[index - 1];
              times = 3 + repeat;
            } else {
              times = (symbol === 17 ? 3 : 11) + repeat;
            }
            if (index + times > total) throw new ZlibFormatError("code lengths overflow");
            lengths.fill(value, index, index + times);
            index += times;
          }
          this.#lengthIndex = index;
          this.#buildDynamicTables();
          state = S_LITLEN;
          break outer;
        }
        case S_ADLER: {
          if (count < 32) {
            this.#starved = true;
            break outer;
          }
          bits = 0;
          count = 0;
          state = S_DONE;
          break outer;
        }
        default:
          break outer;
      }
    }
    this.#bitBuffer = bits;
    this.#bitCount = count;
    this.#state = state;
    this.#inflated = out;
    return pos;
  }

  #buildDynamicTables(): void {
    const lengths = this.#lengths;
    const literals = this.#literalCount;
    if (lengths[256] === 0) throw new ZlibFormatError("missing end-of-block code");
    buildTable(lengths, 0, literals, this.#dynamicLit, LIT_ROOT, true, "literal/length");
    buildTable(
      lengths,
      literals,
      this.#distanceCount,
      this.#dynamicDist,
      DIST_ROOT,
      true,
      "distance",
    );
    this.#lit = this.#dynamicLit;
    this.#dist = this.#dynamicDist;
  }
}
