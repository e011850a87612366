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

import {
  OBJ_OFS_DELTA,
  OBJ_REF_DELTA,
  type PackEntry,
  PackFormatError,
  type PackSummary,
} from "./pack.ts";
import { scanPack } from "./pack_reader.ts";
import { PackWriter, type PackWriteResult } from "./pack_writer.ts";

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

/** Index of the entry starting at `offset`, by binary search over entries in pack order. */
function entryAt(entries: PackEntry[], offset: number): number {
  let lo = 0;
  let hi = entries.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const value = entries[mid].offset;
    if (value === offset) return mid;
    if (value < offset) lo = mid + 1;
    else hi = mid - 1;
  }
  throw new PackFormatError("bad-delta-base", `no entry starts at delta base offset ${offset}`);
}

/** Family (index of its first entry) of each entry: a delta joins its base's family. */
function deltaFamilies(entries: PackEntry[]): Uint32Array {
  const family = new Uint32Array(entries.length);
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i];
    if (entry.type === OBJ_OFS_DELTA && entry.baseOffset !== undefined) {
      const base = entryAt(entries, entry.baseOffset);
      if (base >= i) {
        throw new PackFormatError("bad-delta-base", `entry ${i} has a delta base after it`);
      }
      family[i] = family[base];
    } else {
      family[i] = i;
    }
  }
  return family;
}

/**
 * Plans a split of `entries` (in pack order, as {@link scanPack} returns them) into at most
 * `parts` parts: delta families stay whole, families are assigned largest first to the
 * currently smallest part, and each part keeps the original entry order (so bases precede
 * their deltas). A pack containing any REF_DELTA gets a single part, because its base is
 * named by object id, which a scan does not compute. An empty pack gets one empty part.
 */
export function planSplit(entries: PackEntry[], parts: number): SplitPlan {
  if (!Number.isInteger(parts) || parts < 1) throw new RangeError(`invalid part count ${parts}`);
  const assignment = new Uint32Array(entries.length);
  const total = entries.reduce((n, e) => n + (e.end - e.offset), 0);
  const single = (families: number, note?: string): SplitPlan => ({
    assignment,
    parts: [{ objects: entries.length, bytes: total }],
    families,
    note,
  });
  if (entries.some((e) => e.type === OBJ_REF_DELTA)) {
    return single(
      1,
      "pack contains REF_DELTA entries whose bases are named by object id; kept as one part " +
        "(fetch with ofs-delta to allow splitting)",
    );
  }
  const family = deltaFamilies(entries);
  const familyBytes = new Map<number, number>();
  for (let i = 0; i < entries.length; i++) {
    const f = family[i];
    familyBytes.set(f, (familyBytes.get(f) ?? 0) + entries[i].end - entries[i].offset);
  }
  const roots = [...familyBytes.keys()].sort((a, b) => familyBytes.get(b)! - familyBytes.get(a)!);
  const count = Math.min(parts, roots.length);
  if (count <= 1) {
    return single(
      roots.length,
      roots.length < parts ? `only ${roots.length} delta family` : undefined,
    );
  }
  const planned: SplitPart[] = Array.from({ length: count }, () => ({ objects: 0, bytes: 0 }));
  const partOf = new Map<number, number>();
  for (const root of roots) {
    let smallest = 0;
    for (let p = 1; p < count; p++) {
      if (planned[p].bytes < planned[smallest].bytes) smallest = p;
    }
    partOf.set(root, smallest);
    planned[smallest].bytes += familyBytes.get(root)!;
  }
  for (let i = 0; i < entries.length; i++) {
    const p = partOf.get(family[i])!;
    assignment[i] = p;
    planned[p].objects++;
  }
  const note = count < parts ? `only ${roots.length} delta families to distribute` : undefined;
  return { assignment, parts: planned, families: roots.length, note };
}

/** Routes the bytes of one entry (header, then compressed data) to its part's writer. */
class EntryRouter {
  readonly #header = new Uint8Array(64);
  #headerLength = 0;

  constructor(readonly entry: PackEntry, readonly writer: PackWriter) {}

  /** Consumes `chunk[i, end)` bytes of this entry at pack offset `at`; returns the new index. */
  async take(chunk: Uint8Array, i: number, at: number): Promise<number> {
    const entry = this.entry;
    const headerEnd = entry.offset + entry.headerLength;
    if (at < headerEnd) {
      const n = Math.min(headerEnd - at, chunk.length - i);
      this.#header.set(chunk.subarray(i, i + n), this.#headerLength);
      this.#headerLength += n;
      if (at + n === headerEnd) {
        await this.writer.beginEntry(entry, this.#header.slice(0, this.#headerLength));
      }
      return i + n;
    }
    const n = Math.min(entry.end - at, chunk.length - i);
    await this.writer.writeData(chunk.subarray(i, i + n));
    return i + n;
  }
}

/**
 * Splits the pack read from `source` (the same bytes `summary` was scanned from, with entries
 * kept) according to `plan`, writing part `p` to `sinks[p]` and closing each sink at the end.
 * One streaming pass; writes are awaited, so slow sinks slow the read. Memory stays bounded by
 * the per-part gathering buffers, whatever the entry sizes. The source trailer is not
 * re-hashed (the scan verified it); its length is checked. On failure every sink is aborted.
 */
export async function splitPack(
  source: ReadableStream<Uint8Array>,
  summary: PackSummary,
  plan: SplitPlan,
  sinks: WritableStream<Uint8Array>[],
): Promise<PackWriteResult[]> {
  const entries = summary.entries;
  if (entries.length !== summary.objects) {
    throw new RangeError(
      `summary has ${entries.length} of ${summary.objects} entries; scan with keepEntries`,
    );
  }
  if (plan.assignment.length !== entries.length || sinks.length !== plan.parts.length) {
    throw new RangeError(
      `plan for ${plan.assignment.length} entries in ${plan.parts.length} parts does not match ` +
        `${entries.length} entries and ${sinks.length} sinks`,
    );
  }
  const writers = sinks.map((sink, p) => new PackWriter(sink, plan.parts[p].objects));
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
        if (!router && next < entries.length && at >= entries[next].offset) {
          router = new EntryRouter(entries[next], writers[plan.assignment[next]]);
          next++;
        }
        if (router) {
          i = await router.take(chunk, i, at);
        } else {
          // Pack header or trailer: each part writes its own.
          const stop = next < entries.length ? entries[next].offset - position : chunk.length;
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
    for (const writer of writers) results.push(await writer.finish());
    return results;
  } catch (error) {
    // Best-effort cleanup of source and sinks; the original error is rethrown below.
    await reader.cancel(error).catch(() => {});
    await Promise.all(writers.map((w) => w.abort(error).catch(() => {})));
    throw error;
  } finally {
    reader.releaseLock();
  }
}

/** In-memory sink collecting everything written to it. */
function collectingSink(): { sink: WritableStream<Uint8Array>; bytes: () => Uint8Array } {
  const chunks: Uint8Array[] = [];
  const sink = new WritableStream<Uint8Array>({
    write(chunk) {
      chunks.push(chunk);
    },
  });
  const bytes = () => {
    const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  };
  return { sink, bytes };
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
export async function splitPackBytes(bytes: Uint8Array, parts: number): Promise<Uint8Array[]> {
  const summary = await scanPack(bytesStream(bytes));
  const plan = planSplit(summary.entries, parts);
  const outputs = plan.parts.map(() => collectingSink());
  await splitPack(bytesStream(bytes), summary, plan, outputs.map((o) => o.sink));
  return outputs.map((o) => o.bytes());
}
