/**
 * Compact per-entry table of a scanned pack: one row per entry in growable typed arrays, so a
 * pack of millions of objects can be indexed (and split) inside a 128 MB isolate.
 *
 * A row costs 17 bytes: offset (f64), type and header length packed in one byte, inflated
 * size (u32; the rare larger sizes go to a side map) and delta base as an entry index (i32,
 * -1 for none). Compressed lengths are not stored: entries are contiguous, so an entry ends
 * where the next starts, and the last one at {@link PackEntryTable.dataEnd}. REF_DELTA
 * base ids live in a side map, since git only writes them when asked not to use OFS_DELTA.
 *
 * @module
 */

import { OBJ_OFS_DELTA, OBJ_REF_DELTA, type PackEntry } from "./pack.ts";

/** What {@link PackEntryTable.push} records about one entry. */
export interface EntryRow {
  /** Absolute byte offset of the entry header; must be where the previous entry ended. */
  offset: number;
  /** Entry type code. */
  type: number;
  /** Inflated size from the entry header. */
  size: number;
  /** Bytes of the type/size varint plus the delta base reference (at most 42: SHA-256 REF_DELTA). */
  headerLength: number;
  /** Where the entry ends (`offset + headerLength + compressedLength`). */
  end: number;
  /** For OFS_DELTA: index of the base entry (earlier in the pack). */
  baseIndex?: number;
  /** For REF_DELTA: hex id of the base object. */
  baseId?: string;
}

/**
 * The index as plain columns, trimmed to its length: what is kept outside the heap (e.g. in object
 * storage) between the steps of a build. REF_DELTA base ids are not included.
 */
export interface EntryColumns {
  offsets: Float64Array;
  /** `type << 5 | headerLength` per entry. */
  kinds: Uint8Array;
  /** Inflated sizes; 0xffffffff marks one found in `largeSizes`. */
  sizes: Uint32Array;
  /** OFS_DELTA base entry index, -1 for none. */
  bases: Int32Array;
  /** Where the last entry ends. */
  dataEnd: number;
  /** Entry index and size of the entries of 4 GiB or more. */
  largeSizes: [number, number][];
}

/**
 * What {@link PackEntryTable.fromColumns} takes: the columns a split needs (offsets and kinds), and
 * optionally the others. Offsets may be 32-bit when every offset is below 4 GiB. A table without
 * `sizes` and `bases` locates entries but does not describe them: {@link PackEntryTable.size},
 * {@link PackEntryTable.baseIndex} and {@link PackEntryTable.entry} throw (the entries' headers,
 * read again from the pack, say the rest).
 */
export interface LoadedColumns {
  offsets: Float64Array | Uint32Array;
  kinds: Uint8Array;
  sizes?: Uint32Array;
  bases?: Int32Array;
  dataEnd: number;
  largeSizes?: [number, number][];
}

const INITIAL_CAPACITY = 1024;
/**
 * Header lengths are stored in the low 5 bits of the packed type byte; 0 there means a longer one
 * (a SHA-256 REF_DELTA), kept in a side map.
 */
const HEADER_BITS = 31;
/** The longest entry header: 10-byte type/size varint and a 32-byte (SHA-256) base id. */
const MAX_HEADER_LENGTH = 42;
/** Marks a size kept in the side map. */
const LARGE_SIZE = 0xffffffff;
/** Rough heap cost of one side-map entry (key, value, hash table slot). */
const SIDE_ENTRY_BYTES = 64;

/**
 * The entries of one pack in pack order, stored column-wise. Filled by the pack reader with
 * {@link PackEntryTable.push}; read with the per-column accessors, or {@link PackEntryTable.entry}
 * for a {@link PackEntry} object (allocated on each call).
 */
export class PackEntryTable {
  #offsets: Float64Array | Uint32Array;
  /** `type << 5 | headerLength`. */
  #kinds: Uint8Array;
  #sizes: Uint32Array;
  #bases: Int32Array;
  readonly #largeSizes = new Map<number, number>();
  readonly #baseIds = new Map<number, string>();
  readonly #longHeaders = new Map<number, number>();
  /** Capacity never grows past this when more is not needed (the pack's declared count). */
  readonly #expected: number;
  /** False for a table loaded without its sizes and bases. */
  #described = true;
  #length = 0;
  #end = 0;

  /**
   * An empty index. `expected` (e.g. the object count from the pack header) only caps how far
   * capacity doubles, so an index of exactly that many entries wastes no space; it is not
   * allocated up front, so a wrong count costs nothing.
   */
  constructor(expected = 0) {
    this.#expected = expected;
    const capacity = expected > 0 ? Math.min(expected, INITIAL_CAPACITY) : INITIAL_CAPACITY;
    this.#offsets = new Float64Array(capacity);
    this.#kinds = new Uint8Array(capacity);
    this.#sizes = new Uint32Array(capacity);
    this.#bases = new Int32Array(capacity);
  }

  /** Builds an index from entry objects in pack order (tests, small packs). */
  static fromEntries(entries: Iterable<PackEntry>): PackEntryTable {
    const index = new PackEntryTable();
    for (const entry of entries) {
      let baseIndex: number | undefined;
      if (entry.type === OBJ_OFS_DELTA && entry.baseOffset !== undefined) {
        baseIndex = index.indexOf(entry.baseOffset);
        if (baseIndex < 0) {
          throw new RangeError(`entry ${entry.index}: no entry at base offset ${entry.baseOffset}`);
        }
      }
      index.push({ ...entry, baseIndex });
    }
    return index;
  }

  /**
   * Rebuilds an index from {@link PackEntryTable.columns}, or from the columns a split needs (see
   * {@link LoadedColumns}); the arrays are used, not copied.
   */
  static fromColumns(c: LoadedColumns): PackEntryTable {
    const n = c.offsets.length;
    if (
      c.kinds.length !== n || (c.sizes !== undefined && c.sizes.length !== n) ||
      (c.bases !== undefined && c.bases.length !== n) ||
      (c.sizes === undefined) !== (c.bases === undefined)
    ) {
      throw new RangeError(`index columns of different lengths`);
    }
    if (c.offsets instanceof Uint32Array && c.dataEnd > 0xffffffff) {
      throw new RangeError(`32-bit offsets for a pack of ${c.dataEnd} bytes`);
    }
    const index = new PackEntryTable();
    index.#offsets = c.offsets;
    index.#kinds = c.kinds;
    index.#sizes = c.sizes ?? new Uint32Array(0);
    index.#bases = c.bases ?? new Int32Array(0);
    index.#described = c.sizes !== undefined;
    for (const [i, size] of c.largeSizes ?? []) index.#largeSizes.set(i, size);
    index.#length = n;
    index.#end = c.dataEnd;
    return index;
  }

  /** The columns, as views trimmed to the length (not copies). */
  columns(): EntryColumns {
    const n = this.#length;
    if (!(this.#offsets instanceof Float64Array) || !this.#described) {
      throw new RangeError("columns() of a table loaded from partial or 32-bit columns");
    }
    return {
      offsets: this.#offsets.subarray(0, n),
      kinds: this.#kinds.subarray(0, n),
      sizes: this.#sizes.subarray(0, n),
      bases: this.#bases.subarray(0, n),
      dataEnd: this.#end,
      largeSizes: [...this.#largeSizes],
    };
  }

  /** Number of entries. */
  get length(): number {
    return this.#length;
  }

  /** Where the last entry ends, i.e. where the trailer starts (0 when there are none). */
  get dataEnd(): number {
    return this.#end;
  }

  /** Number of REF_DELTA entries. */
  get refDeltas(): number {
    return this.#baseIds.size;
  }

  /**
   * Appends the next entry. Throws RangeError if it does not start where the previous one
   * ended, or its fields cannot be stored.
   */
  push(entry: EntryRow): void {
    const i = this.#length;
    const { offset, type, size, headerLength, end, baseIndex, baseId } = entry;
    if (i > 0 && offset !== this.#end) {
      throw new RangeError(`entry ${i} at offset ${offset} does not start at ${this.#end}`);
    }
    if (!Number.isInteger(headerLength) || headerLength < 1 || headerLength > MAX_HEADER_LENGTH) {
      throw new RangeError(`entry ${i}: header length ${headerLength} out of range`);
    }
    if (!(end >= offset + headerLength) || !Number.isSafeInteger(end)) {
      throw new RangeError(`entry ${i}: end ${end} before its data`);
    }
    if (!Number.isSafeInteger(size) || size < 0) {
      throw new RangeError(`entry ${i}: invalid size ${size}`);
    }
    if (baseIndex !== undefined && !(baseIndex >= 0 && baseIndex < i)) {
      throw new RangeError(`entry ${i}: base index ${baseIndex} is not an earlier entry`);
    }
    if (!this.#described) throw new RangeError("no entries can be added to a partial index");
    if (i === this.#offsets.length) this.#grow();
    this.#offsets[i] = offset;
    if (headerLength > HEADER_BITS) {
      this.#kinds[i] = type << 5;
      this.#longHeaders.set(i, headerLength);
    } else {
      this.#kinds[i] = (type << 5) | headerLength;
    }
    if (size >= LARGE_SIZE) {
      this.#sizes[i] = LARGE_SIZE;
      this.#largeSizes.set(i, size);
    } else {
      this.#sizes[i] = size;
    }
    this.#bases[i] = baseIndex ?? -1;
    if (baseId !== undefined) this.#baseIds.set(i, baseId);
    this.#end = end;
    this.#length = i + 1;
  }

  /** Absolute offset of entry `i`. */
  offset(i: number): number {
    return this.#offsets[this.#check(i)];
  }

  /** Type code of entry `i`. */
  type(i: number): number {
    return this.#kinds[this.#check(i)] >>> 5;
  }

  /** Header length (type/size varint plus base reference) of entry `i`. */
  headerLength(i: number): number {
    const short = this.#kinds[this.#check(i)] & HEADER_BITS;
    return short === 0 ? this.#longHeaders.get(i)! : short;
  }

  /** Inflated size from the header of entry `i`. */
  size(i: number): number {
    const size = this.#sizes[this.#describedEntry(i)];
    return size === LARGE_SIZE ? this.#largeSizes.get(i)! : size;
  }

  /** Where entry `i` ends: the next entry's offset, or {@link PackEntryTable.dataEnd} for the last. */
  end(i: number): number {
    return this.#check(i) + 1 < this.#length ? this.#offsets[i + 1] : this.#end;
  }

  /** Bytes of entry `i` in the pack, header included. */
  byteLength(i: number): number {
    return this.end(i) - this.#offsets[i];
  }

  /** Bytes of the zlib stream of entry `i`. */
  compressedLength(i: number): number {
    return this.byteLength(i) - this.headerLength(i);
  }

  /** Index of the OFS_DELTA base of entry `i`, or -1 (not an OFS_DELTA). */
  baseIndex(i: number): number {
    return this.#bases[this.#describedEntry(i)];
  }

  /** Hex id of the REF_DELTA base of entry `i`, if it is one. */
  baseId(i: number): string | undefined {
    return this.#baseIds.get(this.#check(i));
  }

  /** Index of the entry starting at `offset` (binary search), or -1. */
  indexOf(offset: number): number {
    const offsets = this.#offsets;
    let lo = 0;
    let hi = this.#length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const value = offsets[mid];
      if (value === offset) return mid;
      if (value < offset) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** Entry `i` as a fresh {@link PackEntry} object. */
  entry(i: number): PackEntry {
    const offset = this.offset(i);
    const headerLength = this.headerLength(i);
    const end = this.end(i);
    const entry: PackEntry = {
      index: i,
      offset,
      type: this.type(i),
      size: this.size(i),
      headerLength,
      compressedLength: end - offset - headerLength,
      end,
    };
    const base = this.#bases[i];
    if (base >= 0) entry.baseOffset = this.#offsets[base];
    if (entry.type === OBJ_REF_DELTA) entry.baseId = this.#baseIds.get(i);
    return entry;
  }

  /** All entries as objects (about 10x the memory of the index: for tests and small packs). */
  toArray(): PackEntry[] {
    return Array.from({ length: this.#length }, (_, i) => this.entry(i));
  }

  /** Approximate bytes held: the typed arrays' capacity plus the side maps. */
  bytesUsed(): number {
    return this.#offsets.byteLength + this.#kinds.byteLength + this.#sizes.byteLength +
      this.#bases.byteLength +
      (this.#largeSizes.size + this.#baseIds.size + this.#longHeaders.size) * SIDE_ENTRY_BYTES;
  }

  /** `i`, checked, of a table that has sizes and bases. */
  #describedEntry(i: number): number {
    if (!this.#described) {
      throw new RangeError(
        "this index was loaded without sizes and bases: read the entry's header",
      );
    }
    return this.#check(i);
  }

  #check(i: number): number {
    if (!(i >= 0 && i < this.#length)) {
      throw new RangeError(`entry index ${i} out of range (${this.#length} entries)`);
    }
    return i;
  }

  #grow(): void {
    const length = this.#length;
    let capacity = length * 2;
    if (this.#expected > length && this.#expected < capacity) capacity = this.#expected;
    const offsets = new Float64Array(capacity);
    offsets.set(this.#offsets);
    this.#offsets = offsets;
    this.#kinds = grown(this.#kinds, new Uint8Array(capacity));
    this.#sizes = grown(this.#sizes, new Uint32Array(capacity));
    this.#bases = grown(this.#bases, new Int32Array(capacity));
  }
}

/** Copies `from` into the larger `to` and returns it. */
function grown<T extends Float64Array | Uint8Array | Uint32Array | Int32Array>(from: T, to: T): T {
  to.set(from);
  return to;
}
