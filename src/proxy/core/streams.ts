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

/**
 * A tee for a client and a copy that may lag (the response cache's store): the client's reads
 * drive the source, so a slow client holds the source back (as a plain relay does) instead of
 * having the answer buffered for it; the copy gets each chunk as the client does, and is errored
 * (and left) once more than `windowBytes` wait unread in it. When the client goes away, the copy
 * drives the source alone. Either way the tee holds at most `windowBytes` beyond the client's
 * own stream, whatever the answer's size (a `ReadableStream.tee()` buffers it all for the
 * slower side).
 */
export function windowedTee(
  source: ReadableStream<Uint8Array>,
  windowBytes: number,
): [client: ReadableStream<Uint8Array>, copy: ReadableStream<Uint8Array>] {
  const reader = source.getReader();
  let client!: ReadableStreamDefaultController<Uint8Array>;
  let copy!: ReadableStreamDefaultController<Uint8Array>;
  let clientDone = false;
  let copyDone = false;
  let reading: Promise<void> | null = null;
  const stopCopy = (why: Error) => {
    if (copyDone) return;
    copyDone = true;
    copy.error(why);
    if (clientDone) reader.cancel(why).catch(() => {});
  };
  const pump = async () => {
    let result: ReadableStreamReadResult<Uint8Array>;
    try {
      result = await reader.read();
    } catch (error) {
      if (!clientDone) client.error(error);
      if (!copyDone) copy.error(error);
      clientDone = copyDone = true;
      return;
    }
    if (result.done) {
      if (!clientDone) client.close();
      if (!copyDone) copy.close();
      clientDone = copyDone = true;
      return;
    }
    if (!clientDone) client.enqueue(result.value);
    if (!copyDone) {
      if ((copy.desiredSize ?? 0) < result.value.byteLength) {
        stopCopy(new Error(`the copy fell more than ${windowBytes} bytes behind`));
      } else copy.enqueue(result.value);
    }
  };
  const pull = () => reading ??= pump().finally(() => (reading = null));
  return [
    new ReadableStream<Uint8Array>({
      start(c) {
        client = c;
      },
      pull,
      cancel(reason) {
        clientDone = true;
        if (copyDone) return reader.cancel(reason);
        // The copy drives the source from now on (its pulls wait for reads of it).
        return pull();
      },
    }, { highWaterMark: 0 }),
    new ReadableStream<Uint8Array>({
      start(c) {
        copy = c;
      },
      pull: () => clientDone ? pull() : undefined,
      cancel() {
        copyDone = true;
        if (clientDone) return reader.cancel();
      },
    }, new ByteLengthQueuingStrategy({ highWaterMark: windowBytes })),
  ];
}
