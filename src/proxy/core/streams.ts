/** Web-stream helpers the routes share. */

/** `bytes` (unless empty), then the rest of `stream`; pulls one chunk at a time. */
export function prefixed(
  bytes: Uint8Array,
  stream: ReadableStream<Uint8Array>,
): ReadableStream<Uint8Array> {
  const reader = stream.getReader();
  let first: Uint8Array | null = bytes.byteLength > 0 ? bytes : null;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (first) {
        controller.enqueue(first);
        first = null;
        return;
      }
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}
