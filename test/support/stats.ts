/** Traffic counters shared by the test servers (origin, file server, relay). */

/** Counters for one `${method} ${pathname}` key. */
export interface PathStats {
  requests: number;
  bytesOut: number;
}

/** One request as a test server saw it. */
export interface RequestRecord {
  method: string;
  path: string;
  /** The `Range` header, if sent. */
  range: string | null;
  /** The `Authorization` header, if sent. */
  authorization: string | null;
}

/** Totals a test server keeps so tests can assert how much it served. */
export interface TrafficStats {
  /** Requests received. */
  requests: number;
  /** Response body bytes handed to clients (counted as the body streams out). */
  bytesOut: number;
  /** Per `${method} ${pathname}` counters. */
  byPath: Record<string, PathStats>;
  /** Every request, in arrival order. */
  log: RequestRecord[];
  /** The most response bodies that were streaming at once (file server and relay). */
  peakBodies: number;
  /** Zeroes every counter. */
  reset(): void;
}

/** Mutable counters implementing {@link TrafficStats}, with helpers for the servers. */
export class TrafficCounter implements TrafficStats {
  requests = 0;
  bytesOut = 0;
  byPath: Record<string, PathStats> = {};
  log: RequestRecord[] = [];
  peakBodies = 0;
  #bodies = 0;

  /** Zeroes every counter. */
  reset(): void {
    this.requests = 0;
    this.bytesOut = 0;
    this.byPath = {};
    this.log = [];
    this.peakBodies = this.#bodies;
  }

  /** Records a new request and returns the key later byte counts go to. */
  request(method: string, pathname: string, headers?: Headers): string {
    const key = `${method} ${pathname}`;
    this.requests++;
    this.entry(key).requests++;
    this.log.push({
      method,
      path: pathname,
      range: headers?.get("range") ?? null,
      authorization: headers?.get("authorization") ?? null,
    });
    return key;
  }

  /** Counts a response body as streaming until the returned function is called (once). */
  bodyStarted(): () => void {
    this.peakBodies = Math.max(this.peakBodies, ++this.#bodies);
    let ended = false;
    return () => {
      if (!ended) this.#bodies--;
      ended = true;
    };
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
 * Wraps a body stream so every chunk the consumer pulls is counted with `onBytes`; `onEnd` runs
 * once when the body closes, fails or is cancelled. Pull-based with no internal queue, so counts
 * follow what the client actually consumed.
 */
export function countingStream(
  source: ReadableStream<Uint8Array>,
  onBytes: (n: number) => void,
  onCancel?: (reason: unknown) => void | Promise<void>,
  onEnd?: () => void,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (e) {
        onEnd?.();
        throw e;
      }
      if (chunk.done) {
        onEnd?.();
        controller.close();
        return;
      }
      onBytes(chunk.value.byteLength);
      controller.enqueue(chunk.value);
    },
    async cancel(reason) {
      onEnd?.();
      await reader.cancel(reason);
      await onCancel?.(reason);
    },
  }, { highWaterMark: 0 });
}
