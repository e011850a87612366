/**
 * Stream helpers for tests: cut a byte array into a stream at chosen
 * boundaries, collect a stream into bytes, pass a stream on piece by piece.
 *
 * @module
 */
import { concat } from "../../src/git/pktline.ts";
import { SeededRandom } from "./random.ts";

/** How {@link chunked} cuts its input. */
export type ChunkPlan =
  | number[]
  | "bytewise"
  | { seed: number; maxChunk?: number };

function chunkSizes(total: number, plan: ChunkPlan): number[] {
  if (plan === "bytewise") return new Array(total).fill(1);
  if (Array.isArray(plan)) {
    for (const n of plan) {
      if (!Number.isInteger(n) || n <= 0) throw new RangeError(`bad chunk size ${n}`);
    }
    const sizes: number[] = [];
    let left = total;
    let i = 0;
    while (left > 0) {
      // Sizes cycle when the list is shorter than the input.
      const n = Math.min(plan.length ? plan[i++ % plan.length] : left, left);
      sizes.push(n);
      left -= n;
    }
    return sizes;
  }
  const rand = new SeededRandom(plan.seed);
  const max = plan.maxChunk ?? 64;
  const sizes: number[] = [];
  let left = total;
  while (left > 0) {
    const n = Math.min(1 + rand.int(max), left);
    sizes.push(n);
    left -= n;
  }
  return sizes;
}

/**
 * A pull-based stream yielding `bytes` cut into chunks: explicit sizes (cycled
 * when shorter than the input), `"bytewise"` (one byte each), or seeded random
 * sizes in [1, maxChunk] (default 64). Each chunk is a fresh copy, so consumers
 * may keep or mutate them.
 */
export function chunked(bytes: Uint8Array, plan: ChunkPlan): ReadableStream<Uint8Array> {
  const sizes = chunkSizes(bytes.length, plan);
  let offset = 0;
  let index = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (index >= sizes.length) {
        controller.close();
        return;
      }
      const n = sizes[index++];
      controller.enqueue(bytes.slice(offset, offset + n));
      offset += n;
    },
  }, { highWaterMark: 0 });
}

/** Reads a stream to the end and returns all its bytes concatenated. */
export async function collect(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of stream) parts.push(chunk);
  return concat(parts);
}

/** Concatenates byte arrays: `src/git/pktline.ts`'s `concat`, under the name the tests use. */
export { concat as concatBytes };

/** UTF-8 encodes a string (shorthand for tests). */
export function utf8(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

/** What a {@link piecewise} step may use besides the bytes it is given. */
export interface PieceContext {
  /** The output stream's controller: a step enqueues, closes or errors through it. */
  controller: ReadableStreamDefaultController<Uint8Array>;
  /** Aborted when the consumer cancels the output; pass it to any wait. */
  signal: AbortSignal;
  /** Cancels the source, for a step that ends the output early. */
  cancelSource(): Promise<void>;
}

/**
 * A pull-based stream (nothing is read ahead) that passes `source` on piece by piece: each pull
 * calls `step` with the unsent rest of the current source chunk, reading the next chunk when that
 * is used up, and closes at the source's end. `step` returns how many bytes of the rest it used;
 * every call must enqueue, close or error (a pull that does none of these is never repeated).
 */
export function piecewise(
  source: ReadableStream<Uint8Array>,
  step: (rest: Uint8Array, context: PieceContext) => Promise<number>,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  const cancelled = new AbortController();
  let rest: Uint8Array | null = null;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!rest || rest.byteLength === 0) {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          return;
        }
        rest = value;
      }
      const used = await step(rest, {
        controller,
        signal: cancelled.signal,
        cancelSource: () => reader.cancel(),
      });
      rest = rest.subarray(used);
    },
    cancel(reason) {
      cancelled.abort(reason);
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}
