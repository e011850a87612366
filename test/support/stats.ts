/** Traffic counters shared by the test servers (origin, file server, relay). */

/** Counters for one `${method} ${pathname}` key. */
export interface PathStats {
  requests: number;
  bytesOut: number;
}

/** Totals a test server keeps so tests can assert how much it served. */
export interface TrafficStats {
  /** Requests received. */
  requests: number;
  /** Response body bytes handed to clients (counted as the body streams out). */
  bytesOut: number;
  /** Per `${method} ${pathname}` counters. */
  byPath: Record<string, PathStats>;
  /** Zeroes every counter. */
  reset(): void;
}

/** Mutable counters implementing {@link TrafficStats}, with helpers for the servers. */
export class TrafficCounter implements TrafficStats {
  requests = 0;
  bytesOut = 0;
  byPath: Record<string, PathStats> = {};

  /** Zeroes every counter. */
  reset(): void {
    this.requests = 0;
    this.bytesOut = 0;
    this.byPath = {};
  }

  /** Records a new request and returns the key later byte counts go to. */
  request(method: string, pathname: string): string {
    const key = `${method} ${pathname}`;
    this.requests++;
    this.entry(key).requests++;
    return key;
  }

  /** Records `n` body bytes sent for `key`. */
  sent(key: string, n: number): void {
    this.bytesOut += n;
    this.entry(key).bytesOut += n;
  }

  private entry(key: string): PathStats {
    return this.byPath[key] ??= { requests: 0, bytesOut: 0 };
  }
}

/**
 * Wraps a body stream so every chunk the consumer pulls is counted with `onBytes`.
 * Pull-based with no internal queue, so counts follow what the client actually consumed.
 */
export function countingStream(
  source: ReadableStream<Uint8Array>,
  onBytes: (n: number) => void,
  onCancel?: (reason: unknown) => void | Promise<void>,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      onBytes(value.byteLength);
      controller.enqueue(value);
    },
    async cancel(reason) {
      await reader.cancel(reason);
      await onCancel?.(reason);
    },
  }, { highWaterMark: 0 });
}
