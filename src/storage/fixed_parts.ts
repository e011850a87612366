/**
 * Re-chunks a byte stream into fixed-size parts, as multipart uploads to object storage require
 * (R2's: every part but the last has the same size). Pulls from the source only when the consumer
 * asks for the next part, so at most one part is held in memory at a time. Runtime-free: Web
 * Streams only.
 */

/** One re-chunked part of a stream. */
export interface Part {
  /** Exactly `size` bytes, except for the last part, which may be shorter (or empty). */
  bytes: Uint8Array;
  /** True for the final part: the source ended right after it. */
  last: boolean;
}

/** Thrown for a part size that is not a positive integer. */
export class PartSizeError extends RangeError {
  override name = "PartSizeError";
  constructor(size: number) {
    super(`part size must be a positive integer, got ${size}`);
  }
}

/** First allocation for a part; parts grow by doubling, so small bodies stay small. */
const INITIAL_CAPACITY = 64 * 1024;
/**
 * A part that outgrows this goes straight to its full size: doubling on to, say, 8 MiB would copy
 * 1, 2 and 4 MiB on the way and hold 12 MiB at the last copy (memory counts in a Worker).
 */
const FULL_SIZE_AFTER = 1024 * 1024;

/** A byte buffer that grows by doubling up to 1 MiB, then to its fixed limit at once. */
class PartBuffer {
  #bytes: Uint8Array;
  #filled = 0;

  /** `reuse`: a buffer of at least `limit` bytes to fill instead of allocating one. */
  constructor(readonly limit: number, reuse?: Uint8Array) {
    this.#bytes = reuse && reuse.byteLength >= limit
      ? reuse.subarray(0, limit)
      : new Uint8Array(Math.min(limit, INITIAL_CAPACITY));
  }

  /** The whole buffer, when it has grown to the limit (so it can be filled again). */
  full(): Uint8Array | undefined {
    return this.#bytes.byteLength === this.limit ? this.#bytes : undefined;
  }

  get room(): number {
    return this.limit - this.#filled;
  }

  /** Appends as much of `chunk` as fits; returns what did not fit (possibly empty). */
  append(chunk: Uint8Array): Uint8Array {
    const take = Math.min(this.room, chunk.byteLength);
    const needed = this.#filled + take;
    if (needed > this.#bytes.byteLength) {
      let capacity = this.#bytes.byteLength;
      while (capacity < needed) capacity *= 2;
      if (capacity > FULL_SIZE_AFTER) capacity = this.limit;
      const grown = new Uint8Array(Math.min(capacity, this.limit));
      grown.set(this.#bytes.subarray(0, this.#filled));
      this.#bytes = grown;
    }
    this.#bytes.set(chunk.subarray(0, take), this.#filled);
    this.#filled = needed;
    return chunk.subarray(take);
  }

  bytes(): Uint8Array {
    return this.#bytes.subarray(0, this.#filled);
  }
}

/**
 * A buffer parts may be filled into, handed from one body to the next: `buffer` is taken when
 * present (and not shared meanwhile), and holds the full-size buffer the last part used.
 */
export interface PartBufferHolder {
  buffer?: Uint8Array;
}

/**
 * Yields `source` as consecutive parts of `size` bytes. An empty source yields one empty last
 * part. Errors from the source propagate; a consumer that stops early cancels the source.
 *
 * With `reuse`, every part is filled into one buffer once it has grown to `size` (or into
 * `reuse.buffer` from the start), instead of a fresh one per part: a part's bytes are then valid
 * only until the next part is asked for, and `reuse.buffer` is that buffer afterwards. Multipart
 * uploads that send each part before reading the next (R2's) allocate one part's memory per body,
 * or none, instead of one per part.
 */
export async function* fixedSizeParts(
  source: ReadableStream<Uint8Array>,
  size: number,
  reuse?: PartBufferHolder,
): AsyncGenerator<Part, void, undefined> {
  if (!Number.isInteger(size) || size <= 0) throw new PartSizeError(size);
  const reader = source.getReader();
  let pending: Uint8Array = new Uint8Array(0);
  let finished = false;
  let failed = false;
  try {
    while (true) {
      const part = new PartBuffer(size, reuse?.buffer);
      pending = part.append(pending);
      while (part.room > 0) {
        const r = await reader.read();
        if (r.done) {
          finished = true;
          break;
        }
        pending = part.append(r.value);
      }
      while (!finished && pending.byteLength === 0) {
        // The part is full: look ahead to learn whether it is also the last one.
        const r = await reader.read();
        if (r.done) finished = true;
        else pending = r.value;
      }
      const full = part.full();
      if (reuse && full) reuse.buffer = full;
      yield { bytes: part.bytes(), last: finished };
      if (finished) return;
    }
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    // A consumer that stops early releases the source instead of leaving it pending.
    if (!finished && !failed) await reader.cancel();
    reader.releaseLock();
  }
}

/**
 * The first part of `source` in parts of `size` bytes, and the parts after it: a store writes a
 * body that ends with its first part in one request, and any other as a multipart upload.
 */
export async function firstPart(
  source: ReadableStream<Uint8Array>,
  size: number,
  reuse?: PartBufferHolder,
): Promise<{ first: Part; rest: AsyncGenerator<Part, void, undefined> }> {
  const rest = fixedSizeParts(source, size, reuse);
  const next = await rest.next();
  // An empty source yields one empty last part: never nothing.
  if (next.done) throw new Error("part reader ended without a part");
  return { first: next.value, rest };
}
