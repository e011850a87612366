/**
 * A pack kept in the store as consecutive segment objects between the steps of a build (see
 * src/proxy/snapshots/snapshot.ts), written as it streams in and read back as one stream.
 */
import type { PackStore } from "./store.ts";

/** A segment that was written is no longer in the store. */
export class MissingSegmentError extends Error {
  override name = "MissingSegmentError";
}

/** Default segment size: R2's default part size. */
export const DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024;

/**
 * A sink that stores what is written as consecutive objects of `size` bytes (the last shorter,
 * at least one), each streamed into the store as its bytes arrive: the origin's pack keeps
 * flowing while a segment is written, and the sink holds no segment buffer of its own (a store
 * that needs one, like R2's, keeps one part).
 */
export function segmentSink(
  store: PackStore,
  keyOf: (i: number) => string,
  size: number,
): { writable: WritableStream<Uint8Array>; count: () => number } {
  let count = 0;
  let current: {
    writer: WritableStreamDefaultWriter<Uint8Array>;
    put: Promise<unknown>;
    filled: number;
  } | null = null;
  const open = () => {
    const pipe = new TransformStream<Uint8Array, Uint8Array>();
    const put = store.put(keyOf(count), pipe.readable);
    // Awaited when the segment ends; a failure before that fails the next write.
    put.catch(() => {});
    return { writer: pipe.writable.getWriter(), put, filled: 0 };
  };
  const finish = async () => {
    const segment = current!;
    current = null;
    await segment.writer.close();
    await segment.put;
    count++;
  };
  const writable = new WritableStream<Uint8Array>({
    async write(chunk) {
      let at = 0;
      while (at < chunk.length) {
        current ??= open();
        const n = Math.min(size - current.filled, chunk.length - at);
        // A failed put cancels its body, which fails this write.
        await Promise.race([current.writer.write(chunk.subarray(at, at + n)), current.put]);
        current.filled += n;
        at += n;
        if (current.filled === size) await finish();
      }
    },
    async close() {
      if (current || count === 0) {
        current ??= open();
        await finish();
      }
    },
    async abort(reason) {
      const segment = current;
      current = null;
      // The unfinished segment's put fails on the aborted body and stores nothing.
      await segment?.writer.abort(reason).catch(() => {});
      await segment?.put.catch(() => {});
    },
  });
  return { writable, count: () => count };
}

/** The concatenation of `count` stored segments, each fetched when the previous one ends. */
export function segmentSource(
  store: PackStore,
  keyOf: (i: number) => string,
  count: number,
): ReadableStream<Uint8Array> {
  let next = 0;
  let reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  let cancelled: { reason: unknown } | null = null;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        if (reader === null) {
          if (next === count) {
            controller.close();
            return;
          }
          const key = keyOf(next++);
          const object = await store.get(key);
          if (!object) throw new MissingSegmentError(`${key} vanished during the build`);
          if (cancelled) {
            // Cancelled while the segment was being opened: release it at once.
            await object.body.cancel(cancelled.reason);
            return;
          }
          reader = object.body.getReader();
        }
        const { done, value } = await reader.read();
        if (!done) {
          controller.enqueue(value);
          return;
        }
        reader = null;
      }
    },
    async cancel(reason) {
      cancelled = { reason };
      await reader?.cancel(reason);
    },
  });
}
