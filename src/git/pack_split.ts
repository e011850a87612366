/**
 * Splitting one pack into several self-contained packs without re-compressing anything.
 *
 * {@link planSplit} groups entries into delta families (an OFS_DELTA always travels with its
 * base, transitively) and balances the families over the parts by compressed size;
 * {@link splitPack} then streams the source pack once more and routes each entry's bytes to
 * its part's {@link PackWriter}.
 *
 * @module
 */

import type { ObjectFormat } from "./object_id.ts";
import { type PackEntry, PackFormatError } from "./pack.ts";
import type { PackEntryTable } from "./pack_entries.ts";
import { type PackSummary, parseEntryHeader, scanPack } from "./pack_reader.ts";
import { hashLength } from "./object_id.ts";
import { concat } from "./pktline.ts";
import { type OffsetMap, PackWriter, type PackWriteResult } from "./pack_writer.ts";

/** Size of one planned part. */
export interface SplitPart {
  /** Number of entries in the part. */
  objects: number;
  /** Sum of the entries' bytes in the source pack (headers and compressed data). */
  bytes: number;
}

/** How a pack's entries are distributed over parts. */
export interface SplitPlan {
  /** Part number of each entry, indexed by entry index. */
  assignment: Uint32Array;
  /** The parts (never more than requested; none empty unless the pack itself is). */
  parts: SplitPart[];
  /** Number of delta families found (the most parts the pack can be split into). */
  families: number;
  /** Why fewer parts than requested were planned, if so. */
  note?: string;
}

/**
 * Plans a split of the entries of `index` (as {@link scanPack} returns it) into at most
 * `parts` parts: delta families stay whole, families are assigned largest first to the
 * currently smallest part, and each part keeps the original entry order (so bases precede
 * their deltas). A pack containing any REF_DELTA gets a single part, because its base is
 * named by object id, which a scan does not compute. An empty pack gets one empty part.
 *
 * Working memory is typed arrays: the assignment (4 bytes per entry) and 9 bytes per delta
 * family (its bytes, which become its sort key, and its part); the families are ordered by a
 * native sort, so the engine copies nothing into its heap. This runs in the isolate that builds a snapshot, whose
 * memory is bounded: `test/git/pack_split_memory_test.ts` holds it to that.
 */
export function planSplit(index: PackEntryTable, parts: number): SplitPlan {
  if (!Number.isInteger(parts) || parts < 1) throw new RangeError(`invalid part count ${parts}`);
  const count = index.length;
  const assignment = new Uint32Array(count);
  const total = count === 0 ? 0 : index.dataEnd - index.offset(0);
  const single = (families: number, note?: string): SplitPlan => {
    assignment.fill(0);
    return { assignment, parts: [{ objects: count, bytes: total }], families, note };
  };
  if (index.refDeltas > 0) {
    return single(
      1,
      "pack contains REF_DELTA entries whose bases are named by object id; kept as one part " +
        "(fetch with ofs-delta to allow splitting)",
    );
  }
  // `assignment` holds each entry's family number (families numbered in pack order) until the
  // last loop turns it into parts.
  const familyBytes = deltaFamilies(index, assignment);
  const families = familyBytes.length;
  const used = Math.min(parts, families);
  if (used <= 1) {
    return single(families, families < parts ? `only ${families} delta family` : undefined);
  }
  const planned: SplitPart[] = Array.from({ length: used }, () => ({ objects: 0, bytes: 0 }));
  const partOf = used <= 0x100 ? new Uint8Array(families) : new Uint32Array(families);
  // Largest family first (ties in pack order), each to the currently smallest part.
  largestFirst(familyBytes, total, (family, bytes) => {
    let smallest = 0;
    for (let p = 1; p < used; p++) {
      if (planned[p].bytes < planned[smallest].bytes) smallest = p;
    }
    planned[smallest].bytes += bytes;
    partOf[family] = smallest;
  });
  for (let i = 0; i < count; i++) {
    const p = partOf[assignment[i]];
    assignment[i] = p;
    planned[p].objects++;
  }
  const note = used < parts ? `only ${families} delta families to distribute` : undefined;
  return { assignment, parts: planned, families, note };
}

/**
 * Numbers the delta families in pack order (a delta joins its base's family), writing each
 * entry's family number into `family`; returns each family's total bytes.
 */
function deltaFamilies(index: PackEntryTable, family: Uint32Array): Float64Array {
  let families = 0;
  for (let i = 0; i < index.length; i++) if (index.baseIndex(i) < 0) families++;
  const familyBytes = new Float64Array(families);
  let next = 0;
  for (let i = 0; i < index.length; i++) {
    const base = index.baseIndex(i);
    // The index only records earlier entries as bases.
    const f = base >= 0 ? family[base] : next++;
    family[i] = f;
    familyBytes[f] += index.byteLength(i);
  }
  return familyBytes;
}

/**
 * Visits the families by decreasing bytes, ties by increasing number. Each family's bytes become,
 * in place, one exact numeric key, `bytes × n + (n − 1 − family)`, sorted natively: no
 * comparator, so the engine sorts the typed array where it is instead of copying every element
 * into two arrays of its heap (16 bytes per family), and no second array. `familyBytes` is
 * consumed. A pack too large for exact keys (`(total + 1) × n` beyond 2^53) falls back to the
 * comparator.
 */
export function largestFirst(
  familyBytes: Float64Array,
  total: number,
  visit: (family: number, bytes: number) => void,
): void {
  const n = familyBytes.length;
  if ((total + 1) * n > Number.MAX_SAFE_INTEGER) {
    const order = Uint32Array.from({ length: n }, (_, f) => f);
    order.sort((a, b) => familyBytes[b] - familyBytes[a] || a - b);
    for (const f of order) visit(f, familyBytes[f]);
    return;
  }
  const keys = familyBytes;
  for (let f = 0; f < n; f++) keys[f] = keys[f] * n + (n - 1 - f);
  keys.sort();
  for (let k = n - 1; k >= 0; k--) {
    const key = keys[k];
    let bytes = Math.floor(key / n);
    let rest = key - bytes * n;
    // The division may round across an integer: correct by one either way.
    if (rest < 0) {
      bytes--;
      rest += n;
    } else if (rest >= n) {
      bytes++;
      rest -= n;
    }
    visit(n - 1 - rest, bytes);
  }
}

/**
 * New offsets of the entries copied so far, one number per source entry shared by all parts
 * (each entry goes to exactly one part): 32 bits when the source pack is under 4 GiB (a part is
 * never larger than its source), else 64. A part only sees its own entries, so a plan that
 * separated a delta from its base fails in the writer instead of producing a bad pack.
 */
class Relocations {
  readonly #offsets: Float64Array | Uint32Array;

  constructor(
    readonly index: PackEntryTable,
    readonly assignment: Uint32Array,
    sourceSize: number,
  ) {
    this.#offsets = sourceSize <= 0xffffffff
      ? new Uint32Array(index.length)
      : new Float64Array(index.length);
  }

  /** The view of one part, for its {@link PackWriter}. */
  forPart(part: number): OffsetMap {
    const find = (sourceOffset: number): number => {
      const i = this.index.indexOf(sourceOffset);
      return i >= 0 && this.assignment[i] === part ? i : -1;
    };
    return {
      get: (sourceOffset) => {
        const i = find(sourceOffset);
        return i < 0 ? undefined : this.#offsets[i];
      },
      set: (sourceOffset, offset) => {
        const i = find(sourceOffset);
        if (i < 0) throw new RangeError(`part ${part} has no entry at offset ${sourceOffset}`);
        this.#offsets[i] = offset;
      },
    };
  }
}

/** Where entry `i` lies in the source pack: what the index says; its header says the rest. */
function located(index: PackEntryTable, i: number): PackEntry {
  const offset = index.offset(i);
  const headerLength = index.headerLength(i);
  const end = index.end(i);
  return {
    index: i,
    offset,
    type: 0,
    size: 0,
    headerLength,
    compressedLength: end - offset - headerLength,
    end,
  };
}

/**
 * `entry` (located by the index) described by its header as read from the source: type, size
 * and delta base come from the bytes themselves, so the index needs no column for them.
 */
function described(entry: PackEntry, header: Uint8Array, idLength: number): PackEntry {
  const parsed = parseEntryHeader(header, 0, header.length, entry.offset, idLength);
  if (parsed === undefined || parsed.length !== entry.headerLength) {
    throw new PackFormatError(
      "bad-header",
      `entry ${entry.index} at offset ${entry.offset}: its header is not the ${entry.headerLength} bytes the scan saw`,
    );
  }
  const out: PackEntry = { ...entry, type: parsed.type, size: parsed.size };
  if (parsed.relativeBase !== undefined) out.baseOffset = entry.offset - parsed.relativeBase;
  if (parsed.baseId !== undefined) out.baseId = parsed.baseId;
  return out;
}

/** Routes the bytes of one entry (header, then compressed data) to its part's writer, if any. */
class EntryRouter {
  readonly #header = new Uint8Array(64);
  #headerLength = 0;

  constructor(
    readonly entry: PackEntry,
    readonly writer: PackWriter | null,
    readonly idLength: number,
  ) {}

  /** Consumes `chunk[i, end)` bytes of this entry at pack offset `at`; returns the new index. */
  async take(chunk: Uint8Array, i: number, at: number): Promise<number> {
    const entry = this.entry;
    if (this.writer === null) return i + Math.min(entry.end - at, chunk.length - i);
    const headerEnd = entry.offset + entry.headerLength;
    if (at < headerEnd) {
      const n = Math.min(headerEnd - at, chunk.length - i);
      this.#header.set(chunk.subarray(i, i + n), this.#headerLength);
      this.#headerLength += n;
      if (at + n === headerEnd) {
        const header = this.#header.slice(0, this.#headerLength);
        await this.writer!.beginEntry(described(entry, header, this.idLength), header);
      }
      return i + n;
    }
    const n = Math.min(entry.end - at, chunk.length - i);
    await this.writer!.writeData(chunk.subarray(i, i + n));
    return i + n;
  }
}

/**
 * Splits the pack read from `source` (the same bytes `summary` was scanned from, with its
 * index kept) according to `plan`, writing part `p` to `sinks[p]` and closing each sink at the end.
 * One streaming pass; writes are awaited, so slow sinks slow the read. Memory stays bounded by
 * the per-part gathering buffers, whatever the entry sizes, plus 4 bytes per entry for the
 * entries' new offsets (8 for a source of 4 GiB or more). The index need only locate the entries
 * (offsets and header lengths): each entry's type, size and delta base are read from its header
 * as it passes. The source trailer is not re-hashed (the scan verified it); its length is
 * checked. On failure every sink is aborted.
 */
export async function splitPack(
  source: ReadableStream<Uint8Array>,
  summary: Pick<PackSummary, "objects" | "size" | "index" | "objectFormat">,
  plan: SplitPlan,
  sinks: WritableStream<Uint8Array>[],
  options: SplitOptions = {},
): Promise<PackWriteResult[]> {
  const only = options.only;
  const index = summary.index;
  const count = index.length;
  if (count !== summary.objects) {
    throw new RangeError(
      `summary has ${count} of ${summary.objects} entries; scan with keepEntries`,
    );
  }
  const wanted = only === undefined ? plan.parts.length : 1;
  if (only !== undefined && !(Number.isInteger(only) && only >= 0 && only < plan.parts.length)) {
    throw new RangeError(`no part ${only} in a plan of ${plan.parts.length} parts`);
  }
  if (plan.assignment.length !== count || sinks.length !== wanted) {
    throw new RangeError(
      `plan for ${plan.assignment.length} entries in ${plan.parts.length} parts does not match ` +
        `${count} entries and ${sinks.length} sinks`,
    );
  }
  const relocations = new Relocations(index, plan.assignment, summary.size);
  const idLength = hashLength(summary.objectFormat);
  // With `only`, the other parts get no writer: their entries are skipped.
  const writers: (PackWriter | null)[] = plan.parts.map((part, p) => {
    if (only !== undefined && p !== only) return null;
    const sink = sinks[only === undefined ? p : 0];
    return new PackWriter(sink, part.objects, relocations.forPart(p), summary.objectFormat);
  });
  const reader = source.getReader();
  try {
    let position = 0;
    let next = 0;
    let router: EntryRouter | undefined;
    for (;;) {
      const { done, value: chunk } = await reader.read();
      if (done) break;
      let i = 0;
      while (i < chunk.length) {
        const at = position + i;
        if (router && at >= router.entry.end) router = undefined;
        if (!router && next < count && at >= index.offset(next)) {
          const writer = writers[plan.assignment[next]];
          // Skipped entries need no PackEntry object: only their end is used.
          router = writer === null
            ? new EntryRouter(skipped(index, next), null, idLength)
            : new EntryRouter(located(index, next), writer, idLength);
          next++;
        }
        if (router) {
          i = await router.take(chunk, i, at);
        } else {
          // Pack header or trailer: each part writes its own.
          const stop = next < count ? index.offset(next) - position : chunk.length;
          i = Math.min(Math.max(stop, i + 1), chunk.length);
        }
      }
      position += chunk.length;
    }
    if (position !== summary.size) {
      throw new PackFormatError(
        position < summary.size ? "truncated" : "trailing-data",
        `source pack has ${position} bytes, but the scan saw ${summary.size}`,
      );
    }
    const results: PackWriteResult[] = [];
    for (const writer of writers) if (writer) results.push(await writer.finish());
    return results;
  } catch (error) {
    // Best-effort cleanup of source and sinks; the original error is rethrown below.
    await reader.cancel(error).catch(() => {});
    await Promise.all(writers.map((w) => w?.abort(error).catch(() => {})));
    throw error;
  } finally {
    reader.releaseLock();
  }
}

/** Options for {@link splitPack}. */
export interface SplitOptions {
  /** Write only this part (to the single sink given); entries of other parts are skipped. */
  only?: number;
}

/** Where entry `i` lies, for skipping it (the fields a router reads). */
function skipped(index: PackEntryTable, i: number): PackEntry {
  const offset = index.offset(i);
  const end = index.end(i);
  return { index: i, offset, type: 0, size: 0, headerLength: 0, compressedLength: 0, end };
}

/** In-memory sink collecting everything written to it. */
function collectingSink(): { sink: WritableStream<Uint8Array>; bytes: () => Uint8Array } {
  const chunks: Uint8Array[] = [];
  const sink = new WritableStream<Uint8Array>({
    write(chunk) {
      chunks.push(chunk);
    },
  });
  return { sink, bytes: () => concat(chunks) };
}

/** A stream over in-memory bytes, in 64 KiB views. */
function bytesStream(bytes: Uint8Array): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.length) {
        controller.close();
        return;
      }
      const end = Math.min(at + 65536, bytes.length);
      controller.enqueue(bytes.subarray(at, end));
      at = end;
    },
  });
}

/** Convenience for tests and the CLI: scans, plans and splits an in-memory pack. */
export async function splitPackBytes(
  bytes: Uint8Array,
  parts: number,
  objectFormat: ObjectFormat = "sha1",
): Promise<Uint8Array[]> {
  const summary = await scanPack(bytesStream(bytes), { objectFormat });
  const plan = planSplit(summary.index, parts);
  const outputs = plan.parts.map(() => collectingSink());
  await splitPack(bytesStream(bytes), summary, plan, outputs.map((o) => o.sink));
  return outputs.map((o) => o.bytes());
}
