/**
 * Streaming pack reader: one pass over a packfile that locates every entry (offset, type,
 * inflated size, header and compressed lengths, delta base) without inflating anything, and
 * verifies the pack's structure and SHA-1 trailer.
 *
 * Memory is bounded by the compact entry index ({@link PackEntryTable}, 17 bytes per entry,
 * plus a few KB of scanner tables): no entry, and never the whole pack, is buffered. Entry
 * ends are found with {@link DeflateScanner}.
 *
 * @module
 */

import { sha1 } from "@noble/hashes/legacy.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { DeflateScanner, ZlibFormatError } from "./deflate_scan.ts";
import {
  isObjectType,
  OBJ_OFS_DELTA,
  OBJ_REF_DELTA,
  PACK_HEADER_LENGTH,
  PACK_SIGNATURE,
  type PackEntry,
  PackFormatError,
} from "./pack.ts";
import { hashLength, type ObjectFormat } from "./object_id.ts";
import { PackEntryTable } from "./pack_entries.ts";

/** What a full scan of a pack established. */
export interface PackSummary {
  /** Pack format version (always 2: the only one git writes). */
  version: number;
  /** Number of entries. */
  objects: number;
  /** Hex trailer (verified): SHA-1, or SHA-256 for a SHA-256 pack. */
  checksum: string;
  /** The hash the pack uses (trailer and REF_DELTA bases). */
  objectFormat: ObjectFormat;
  /** Total pack length in bytes, trailer included. */
  size: number;
  /** Compact index of the entries in pack order (empty when the scan was told not to keep them). */
  index: PackEntryTable;
  /**
   * The same entries as objects, materialised from {@link PackSummary.index} on first read
   * (about 10x its memory): for tests and small packs; large-pack code should use `index`.
   */
  readonly entries: PackEntry[];
}

/** Options for {@link scanPack} and {@link packScanner}. */
export interface ScanOptions {
  /** Called for each entry as soon as its end is known (allocates one object per entry). */
  onEntry?(entry: PackEntry): void;
  /**
   * Keep the entry index in the summary (default true). When false the summary's index is
   * empty; the scan still builds one while it runs, to resolve OFS_DELTA bases.
   */
  keepEntries?: boolean;
  /** The pack's hash (default `sha1`): REF_DELTA base ids and the trailer are this long. */
  objectFormat?: ObjectFormat;
}

/** Longest possible entry header: 10-byte type/size varint + 32-byte (SHA-256) REF_DELTA base. */
const MAX_ENTRY_HEADER = 42;
/** Largest size varint shift that still yields an exact JS number. */
const MAX_SIZE_SHIFT = 46;

// Parser phases.
const PHASE_HEADER = 0;
const PHASE_ENTRY_HEADER = 1;
const PHASE_DATA = 2;
const PHASE_TRAILER = 3;
const PHASE_DONE = 4;

/** The entry being scanned: what its header said. */
interface CurrentEntry {
  index: number;
  offset: number;
  type: number;
  size: number;
  headerLength: number;
  baseIndex?: number;
  baseId?: string;
}

/** A parsed entry header (the part before the zlib stream). */
export interface EntryHeader {
  type: number;
  size: number;
  length: number;
  relativeBase?: number;
  baseId?: string;
}

/**
 * Parses an entry header at `bytes[start, end)`. Returns undefined if the window ends before
 * the header does; throws {@link PackFormatError} if it is malformed.
 */
export function parseEntryHeader(
  bytes: Uint8Array,
  start: number,
  end: number,
  offset: number,
  idLength: number,
): EntryHeader | undefined {
  let p = start;
  if (p >= end) return undefined;
  let c = bytes[p++];
  const type = (c >>> 4) & 7;
  let size = c & 15;
  let shift = 4;
  while (c & 0x80) {
    if (p >= end) return undefined;
    if (shift > MAX_SIZE_SHIFT) {
      throw new PackFormatError("bad-header", `entry at offset ${offset}: size varint too long`);
    }
    c = bytes[p++];
    size += (c & 0x7f) * 2 ** shift;
    shift += 7;
  }
  if (!isObjectType(type)) {
    throw new PackFormatError("bad-type", `entry at offset ${offset}: invalid type ${type}`);
  }
  if (type === OBJ_OFS_DELTA) {
    if (p >= end) return undefined;
    c = bytes[p++];
    let relative = c & 0x7f;
    while (c & 0x80) {
      if (p >= end) return undefined;
      if (relative > offset) break;
      c = bytes[p++];
      relative = (relative + 1) * 128 + (c & 0x7f);
    }
    if (relative === 0 || relative > offset - PACK_HEADER_LENGTH) {
      throw new PackFormatError(
        "bad-delta-base",
        `entry at offset ${offset}: delta base offset -${relative} is outside the pack`,
      );
    }
    return { type, size, length: p - start, relativeBase: relative };
  }
  if (type === OBJ_REF_DELTA) {
    if (end - p < idLength) return undefined;
    const baseId = bytesToHex(bytes.subarray(p, p + idLength));
    return { type, size, length: p + idLength - start, baseId };
  }
  return { type, size, length: p - start };
}

/**
 * Incremental pack parser: {@link PackParser.push} chunks in order, then
 * {@link PackParser.finish}. Both throw {@link PackFormatError} on bad input; after an error
 * the parser must not be used again.
 */
export class PackParser {
  readonly #onEntry?: (entry: PackEntry) => void;
  readonly #keepEntries: boolean;
  readonly #format: ObjectFormat;
  readonly #idLength: number;
  readonly #hash: ReturnType<typeof sha1.create> | ReturnType<typeof sha256.create>;
  readonly #scanner = new DeflateScanner();
  #index = new PackEntryTable();
  /** Small staging buffer for the pack header, entry headers split across chunks, trailer. */
  readonly #staged = new Uint8Array(MAX_ENTRY_HEADER);
  #stagedLength = 0;
  #phase: number = PHASE_HEADER;
  /** Absolute offset of the next byte to be pushed. */
  #position = 0;
  #version = 0;
  #objects = 0;
  #entryIndex = 0;
  /** The entry being scanned (its end and compressed length not yet known). */
  #current?: CurrentEntry;
  #checksum = "";

  constructor(options: ScanOptions = {}) {
    this.#onEntry = options.onEntry;
    this.#keepEntries = options.keepEntries ?? true;
    this.#format = options.objectFormat ?? "sha1";
    this.#idLength = hashLength(this.#format);
    this.#hash = this.#format === "sha256" ? sha256.create() : sha1.create();
  }

  /** Feeds the next chunk of the pack. */
  push(chunk: Uint8Array): void {
    let i = 0;
    const end = chunk.length;
    let hashFrom = 0;
    while (i < end) {
      switch (this.#phase) {
        case PHASE_HEADER:
          i = this.#readPackHeader(chunk, i);
          break;
        case PHASE_ENTRY_HEADER:
          i = this.#readEntryHeader(chunk, i);
          break;
        case PHASE_DATA:
          i = this.#readData(chunk, i);
          break;
        case PHASE_TRAILER:
          if (hashFrom < i) {
            this.#hash.update(chunk.subarray(hashFrom, i));
            hashFrom = i;
          }
          i = this.#readTrailer(chunk, i);
          hashFrom = end;
          break;
        case PHASE_DONE:
          throw new PackFormatError(
            "trailing-data",
            `unexpected data after the pack trailer at offset ${this.#position + i}`,
          );
      }
      if (this.#phase === PHASE_ENTRY_HEADER && this.#entryIndex === this.#objects) {
        this.#phase = PHASE_TRAILER;
      }
    }
    if (hashFrom < end && this.#phase !== PHASE_DONE) {
      this.#hash.update(chunk.subarray(hashFrom, end));
    }
    this.#position += end;
  }

  /** Signals the end of input and returns the summary; throws if the pack is incomplete. */
  finish(): PackSummary {
    if (this.#phase !== PHASE_DONE) {
      throw new PackFormatError(
        "truncated",
        `pack truncated at offset ${this.#position}: ${this.#where()}`,
      );
    }
    const index = this.#keepEntries ? this.#index : new PackEntryTable();
    let entries: PackEntry[] | undefined;
    return {
      version: this.#version,
      objects: this.#objects,
      checksum: this.#checksum,
      objectFormat: this.#format,
      size: this.#position,
      index,
      get entries() {
        return entries ??= index.toArray();
      },
    };
  }

  #where(): string {
    switch (this.#phase) {
      case PHASE_HEADER:
        return "inside the pack header";
      case PHASE_ENTRY_HEADER:
      case PHASE_DATA:
        return `inside entry ${this.#entryIndex} of ${this.#objects}` +
          (this.#current ? ` (offset ${this.#current.offset})` : "");
      default:
        return "inside the trailer";
    }
  }

  /** Appends up to `want - stagedLength` bytes to the staging buffer; returns the new index. */
  #stage(chunk: Uint8Array, i: number, want: number): number {
    const n = Math.min(want - this.#stagedLength, chunk.length - i);
    this.#staged.set(chunk.subarray(i, i + n), this.#stagedLength);
    this.#stagedLength += n;
    return i + n;
  }

  #readPackHeader(chunk: Uint8Array, i: number): number {
    i = this.#stage(chunk, i, PACK_HEADER_LENGTH);
    if (this.#stagedLength < PACK_HEADER_LENGTH) return i;
    const header = this.#staged;
    for (let k = 0; k < 4; k++) {
      if (header[k] !== PACK_SIGNATURE[k]) {
        throw new PackFormatError("bad-signature", "not a pack: missing PACK signature");
      }
    }
    const view = new DataView(header.buffer, header.byteOffset, PACK_HEADER_LENGTH);
    this.#version = view.getUint32(4);
    if (this.#version !== 2) {
      throw new PackFormatError("bad-version", `unsupported pack version ${this.#version}`);
    }
    this.#objects = view.getUint32(8);
    this.#index = new PackEntryTable(this.#objects);
    this.#stagedLength = 0;
    this.#phase = PHASE_ENTRY_HEADER;
    return i;
  }

  #readEntryHeader(chunk: Uint8Array, i: number): number {
    const offset = this.#position + i - this.#stagedLength;
    let header: EntryHeader | undefined;
    if (this.#stagedLength === 0) {
      header = parseEntryHeader(chunk, i, chunk.length, offset, this.#idLength);
      if (header === undefined) return this.#stage(chunk, i, MAX_ENTRY_HEADER);
      i += header.length;
    } else {
      // Header split across chunks: add bytes one at a time until it parses.
      while (header === undefined && i < chunk.length) {
        i = this.#stage(chunk, i, this.#stagedLength + 1);
        header = parseEntryHeader(this.#staged, 0, this.#stagedLength, offset, this.#idLength);
      }
      if (header === undefined) return i;
      this.#stagedLength = 0;
    }
    this.#startEntry(offset, header);
    return i;
  }

  #startEntry(offset: number, header: EntryHeader): void {
    const entry: CurrentEntry = {
      index: this.#entryIndex,
      offset,
      type: header.type,
      size: header.size,
      headerLength: header.length,
      baseId: header.baseId,
    };
    if (header.relativeBase !== undefined) {
      const baseOffset = offset - header.relativeBase;
      entry.baseIndex = this.#index.indexOf(baseOffset);
      if (entry.baseIndex < 0) {
        throw new PackFormatError(
          "bad-delta-base",
          `entry ${entry.index} at offset ${offset}: delta base offset ${baseOffset} is not the start of an earlier entry`,
        );
      }
    }
    this.#current = entry;
    this.#scanner.reset();
    this.#phase = PHASE_DATA;
  }

  #readData(chunk: Uint8Array, i: number): number {
    const entry = this.#current!;
    const scanner = this.#scanner;
    let next: number;
    try {
      next = scanner.scan(chunk, i, chunk.length);
    } catch (error) {
      if (!(error instanceof ZlibFormatError)) throw error;
      throw new PackFormatError(
        "bad-zlib",
        `entry ${entry.index} at offset ${entry.offset}: ${error.message}`,
        { cause: error },
      );
    }
    if (
      scanner.inflatedLength > entry.size || (scanner.done && scanner.inflatedLength !== entry.size)
    ) {
      throw new PackFormatError(
        "size-mismatch",
        `entry ${entry.index} at offset ${entry.offset}: header says ${entry.size} bytes, data inflates to ${
          scanner.done ? "" : "more than "
        }${scanner.inflatedLength}`,
      );
    }
    if (scanner.done) this.#finishEntry(entry);
    return next;
  }

  #finishEntry(entry: CurrentEntry): void {
    const end = entry.offset + entry.headerLength + this.#scanner.compressedLength;
    this.#index.push({ ...entry, end });
    this.#current = undefined;
    this.#entryIndex++;
    this.#phase = PHASE_ENTRY_HEADER;
    this.#onEntry?.(this.#index.entry(entry.index));
  }

  #readTrailer(chunk: Uint8Array, i: number): number {
    i = this.#stage(chunk, i, this.#idLength);
    if (this.#stagedLength < this.#idLength) return i;
    const expected = bytesToHex(this.#hash.digest());
    const actual = bytesToHex(this.#staged.subarray(0, this.#idLength));
    if (expected !== actual) {
      const hash = this.#format === "sha256" ? "SHA-256" : "SHA-1";
      throw new PackFormatError(
        "bad-checksum",
        `pack trailer ${actual} does not match the ${hash} of the pack contents ${expected}`,
      );
    }
    this.#checksum = actual;
    this.#stagedLength = 0;
    this.#phase = PHASE_DONE;
    return i;
  }
}

/**
 * Scans a whole pack from `stream` in one pass: locates every entry and verifies the
 * signature, version, object count, each entry's zlib structure and inflated size, OFS_DELTA
 * bases, the SHA-1 trailer and the absence of trailing bytes. Rejects with
 * {@link PackFormatError} (and cancels the stream) on the first problem.
 */
export async function scanPack(
  stream: ReadableStream<Uint8Array>,
  options: ScanOptions = {},
): Promise<PackSummary> {
  const parser = new PackParser(options);
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.push(value);
    }
  } catch (error) {
    // Best-effort cleanup: the scan error below is the one worth reporting.
    await reader.cancel(error).catch(() => {});
    throw error;
  } finally {
    reader.releaseLock();
  }
  return parser.finish();
}

/** A pass-through pack scanner, see {@link packScanner}. */
export interface PackScannerStream {
  /** Bytes written are checked and passed through unchanged. */
  stream: TransformStream<Uint8Array, Uint8Array>;
  /** Resolves when the input ends with a valid pack; rejects with the scan's error. */
  summary: Promise<PackSummary>;
}

/**
 * A transform that passes pack bytes through unchanged while scanning them, so a pack can be
 * stored and indexed in the same pass. On bad input both the transform and `summary` fail
 * with the {@link PackFormatError}; the chunk that revealed the problem is not forwarded.
 */
export function packScanner(options: ScanOptions = {}): PackScannerStream {
  const parser = new PackParser(options);
  let resolve!: (summary: PackSummary) => void;
  let reject!: (error: unknown) => void;
  const summary = new Promise<PackSummary>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // The failure is also reported through the stream, which callers always observe; this keeps
  // an unobserved summary promise from becoming an unhandled rejection.
  summary.catch(() => {});
  const stream = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      try {
        parser.push(chunk);
      } catch (error) {
        reject(error);
        throw error;
      }
      controller.enqueue(chunk);
    },
    flush() {
      try {
        resolve(parser.finish());
      } catch (error) {
        reject(error);
        throw error;
      }
    },
    cancel(reason) {
      reject(reason);
    },
  });
  return { stream, summary };
}
