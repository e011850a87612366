/**
 * Streaming pack writer: emits `PACK`, version 2, the object count, entries copied from
 * another pack, and the SHA-1 trailer, into a `WritableStream` with backpressure.
 *
 * Entries are copied verbatim (header and compressed bytes). The only rewrite is the header of
 * an OFS_DELTA entry whose base ended up at a different distance in the new pack; its
 * compressed bytes are never touched. Small writes are gathered into 64 KiB chunks.
 *
 * @module
 */

import { sha1 } from "@noble/hashes/legacy.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js";
import { hashLength, type ObjectFormat } from "./object_id.ts";
import {
  OBJ_OFS_DELTA,
  OBJ_REF_DELTA,
  PACK_HEADER_LENGTH,
  PACK_SIGNATURE,
  type PackEntry,
  PackFormatError,
} from "./pack.ts";

/** What a finished pack looks like. */
export interface PackWriteResult {
  /** Hex trailer of the written pack (SHA-1, or SHA-256 for a SHA-256 pack). */
  hash: string;
  /** Total bytes written, trailer included. */
  size: number;
  /** Number of entries. */
  objects: number;
}

/**
 * Where a {@link PackWriter} remembers the offset each copied entry got in the new pack,
 * keyed by its offset in the source pack (to re-encode OFS_DELTA base distances). A `Map`
 * will do; large splits pass a typed-array-backed one.
 */
export interface OffsetMap {
  /** New offset of the entry that was at `sourceOffset`, if it was written. */
  get(sourceOffset: number): number | undefined;
  /** Records that the entry at `sourceOffset` was written at `offset`. */
  set(sourceOffset: number, offset: number): unknown;
}

/** Encodes an entry's type and inflated size as the pack's type/size varint. */
export function encodeEntryHeader(type: number, size: number): Uint8Array {
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`invalid entry size ${size}`);
  const bytes: number[] = [];
  let rest = Math.floor(size / 16);
  let byte = (type << 4) | (size % 16);
  while (rest > 0) {
    bytes.push(byte | 0x80);
    byte = rest % 128;
    rest = Math.floor(rest / 128);
  }
  bytes.push(byte);
  return Uint8Array.from(bytes);
}

/**
 * Encodes an OFS_DELTA base distance (bytes back from the delta's own offset) in git's
 * offset varint: big-endian 7-bit groups where each continuation adds one.
 */
export function encodeOfsOffset(distance: number): Uint8Array {
  if (!Number.isSafeInteger(distance) || distance <= 0) {
    throw new RangeError(`invalid delta base distance ${distance}`);
  }
  const bytes: number[] = [distance % 128];
  let rest = Math.floor(distance / 128);
  while (rest > 0) {
    rest -= 1;
    bytes.push(0x80 | (rest % 128));
    rest = Math.floor(rest / 128);
  }
  return Uint8Array.from(bytes.reverse());
}

/** Writes of at least this size bypass the gathering buffer. */
const DIRECT_WRITE = 16 * 1024;
const GATHER_SIZE = 64 * 1024;

/**
 * Writes one pack of a known number of entries to `sink`. Use either
 * {@link PackWriter.writeEntry} per entry, or {@link PackWriter.beginEntry} followed by
 * {@link PackWriter.writeData} calls totalling the entry's `compressedLength`; then
 * {@link PackWriter.finish}, which writes the trailer and closes the sink.
 *
 * Chunks handed to the writer may be passed to the sink without copying: do not modify them
 * afterwards.
 */
export class PackWriter {
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #objects: number;
  readonly #hash: ReturnType<typeof sha1.create> | ReturnType<typeof sha256.create>;
  readonly #idLength: number;
  /** Original offset → offset in this pack, for OFS_DELTA bases. */
  readonly #newOffsets: OffsetMap;
  #gather = new Uint8Array(GATHER_SIZE);
  #gathered = 0;
  #size = 0;
  #written = 0;
  #dataLeft = 0;
  #current?: PackEntry;
  #result?: PackWriteResult;

  /**
   * Starts a pack of exactly `objects` entries on `sink` (its writer is held until finish).
   * `offsets` records where copied entries land (default: a new `Map`).
   */
  constructor(
    sink: WritableStream<Uint8Array>,
    objects: number,
    offsets: OffsetMap = new Map<number, number>(),
    objectFormat: ObjectFormat = "sha1",
  ) {
    this.#hash = objectFormat === "sha256" ? sha256.create() : sha1.create();
    this.#idLength = hashLength(objectFormat);
    if (!Number.isInteger(objects) || objects < 0 || objects > 0xffffffff) {
      throw new RangeError(`invalid object count ${objects}`);
    }
    this.#objects = objects;
    this.#newOffsets = offsets;
    this.#writer = sink.getWriter();
    const header = new Uint8Array(PACK_HEADER_LENGTH);
    header.set(PACK_SIGNATURE);
    const view = new DataView(header.buffer);
    view.setUint32(4, 2);
    view.setUint32(8, objects);
    this.#append(header);
  }

  /** The hex SHA-1 trailer; available once {@link finish} has completed. */
  get hash(): string {
    if (!this.#result) throw new Error("PackWriter.hash read before finish()");
    return this.#result.hash;
  }

  /** Bytes emitted so far (the offset the next entry will get). */
  get size(): number {
    return this.#size;
  }

  /**
   * Starts copying `entry` (located in its source pack by a scan). `originalHeader` is the
   * entry's header as it appeared in the source; it is reused verbatim unless the entry is an
   * OFS_DELTA whose base distance changed. Its base must already be in this pack.
   */
  async beginEntry(entry: PackEntry, originalHeader?: Uint8Array): Promise<void> {
    this.#checkEntryComplete();
    if (this.#written === this.#objects) {
      throw new PackFormatError(
        "bad-count",
        `pack declared ${this.#objects} objects; refusing to write another`,
      );
    }
    const offset = this.#size;
    const header = this.#headerFor(entry, offset, originalHeader);
    this.#newOffsets.set(entry.offset, offset);
    this.#current = entry;
    this.#dataLeft = entry.compressedLength;
    this.#written++;
    await this.#write(header);
  }

  /** Writes the next compressed bytes of the current entry. */
  async writeData(chunk: Uint8Array): Promise<void> {
    if (chunk.length > this.#dataLeft) {
      const where = this.#current ? `entry ${this.#current.index}` : "no entry";
      throw new PackFormatError(
        "size-mismatch",
        `${where}: ${chunk.length} more bytes than its compressed length allows`,
      );
    }
    this.#dataLeft -= chunk.length;
    await this.#write(chunk);
  }

  /** Copies a whole entry: `bytes` is its header followed by its compressed data. */
  async writeEntry(entry: PackEntry, bytes: Uint8Array): Promise<void> {
    if (bytes.length !== entry.headerLength + entry.compressedLength) {
      throw new PackFormatError(
        "size-mismatch",
        `entry ${entry.index}: got ${bytes.length} bytes, expected ${
          entry.headerLength + entry.compressedLength
        }`,
      );
    }
    await this.beginEntry(entry, bytes.subarray(0, entry.headerLength));
    await this.writeData(bytes.subarray(entry.headerLength));
  }

  /** Writes the trailer, closes the sink and reports the pack's hash and size. */
  async finish(): Promise<PackWriteResult> {
    this.#checkEntryComplete();
    if (this.#written !== this.#objects) {
      throw new PackFormatError(
        "bad-count",
        `pack declared ${this.#objects} objects but ${this.#written} were written`,
      );
    }
    const trailer = this.#hash.digest();
    if (this.#gathered + trailer.length > GATHER_SIZE) await this.#flush();
    this.#appendUnhashed(trailer);
    await this.#flush();
    await this.#writer.close();
    this.#result = { hash: bytesToHex(trailer), size: this.#size, objects: this.#objects };
    return this.#result;
  }

  /** Aborts the sink (after a failure elsewhere); the pack is left incomplete. */
  async abort(reason: unknown): Promise<void> {
    await this.#writer.abort(reason);
  }

  #checkEntryComplete(): void {
    if (this.#dataLeft > 0) {
      throw new PackFormatError(
        "size-mismatch",
        `entry ${this.#current?.index} is missing ${this.#dataLeft} bytes of compressed data`,
      );
    }
  }

  #headerFor(entry: PackEntry, offset: number, original?: Uint8Array): Uint8Array {
    if (entry.type === OBJ_OFS_DELTA) {
      const base = entry.baseOffset === undefined
        ? undefined
        : this.#newOffsets.get(entry.baseOffset);
      if (base === undefined) {
        throw new PackFormatError(
          "bad-delta-base",
          `entry ${entry.index}: delta base at offset ${entry.baseOffset} was not written before it`,
        );
      }
      if (original && offset - base === entry.offset - entry.baseOffset!) return original;
      const typeSize = encodeEntryHeader(entry.type, entry.size);
      const distance = encodeOfsOffset(offset - base);
      const header = new Uint8Array(typeSize.length + distance.length);
      header.set(typeSize);
      header.set(distance, typeSize.length);
      return header;
    }
    if (original) return original;
    const typeSize = encodeEntryHeader(entry.type, entry.size);
    if (entry.type !== OBJ_REF_DELTA) return typeSize;
    if (entry.baseId === undefined) {
      throw new PackFormatError(
        "bad-delta-base",
        `entry ${entry.index}: REF_DELTA without base id`,
      );
    }
    const header = new Uint8Array(typeSize.length + this.#idLength);
    header.set(typeSize);
    header.set(hexToBytes(entry.baseId), typeSize.length);
    return header;
  }

  async #write(chunk: Uint8Array): Promise<void> {
    if (chunk.length < DIRECT_WRITE) {
      if (this.#gathered + chunk.length > GATHER_SIZE) await this.#flush();
      this.#append(chunk);
      return;
    }
    await this.#flush();
    this.#hash.update(chunk);
    this.#size += chunk.length;
    await this.#writer.write(chunk);
  }

  /** Adds bytes to the gathering buffer (hashed); the caller guarantees they fit. */
  #append(chunk: Uint8Array): void {
    this.#hash.update(chunk);
    this.#appendUnhashed(chunk);
  }

  #appendUnhashed(chunk: Uint8Array): void {
    this.#gather.set(chunk, this.#gathered);
    this.#gathered += chunk.length;
    this.#size += chunk.length;
  }

  async #flush(): Promise<void> {
    if (this.#gathered === 0) return;
    const out = this.#gather.subarray(0, this.#gathered);
    // The sink may keep the chunk, so the next writes go to a fresh buffer.
    this.#gather = new Uint8Array(GATHER_SIZE);
    this.#gathered = 0;
    await this.#writer.write(out);
  }
}
