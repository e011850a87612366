/** Plumbing shared by the test file server and relay: a loopback server that stops promptly. */

/** A handler that also receives the server's closing signal. */
export type TestHandler = (
  req: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  closing: AbortSignal,
) => Response | Promise<Response>;

/** A running loopback server. */
export interface LoopbackServer {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  url: string;
  /** Ends every response under way, then shuts the server; idempotent. */
  stop(): Promise<void>;
}

/** Serves `handler` on 127.0.0.1 with an ephemeral port. */
export function serveLoopback(handler: TestHandler): LoopbackServer {
  const closing = new AbortController();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req, info) => handler(req, info, closing.signal),
  );
  let stopped: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    stop: () =>
      stopped ??= (async () => {
        closing.abort(new ServerStopped());
        await server.shutdown();
      })(),
  };
}

/** The server was stopped while a response was under way. */
export class ServerStopped extends Error {
  override name = "ServerStopped";
  constructor() {
    super("test server stopped");
  }
}

/**
 * Passes `source` through until `signal` aborts, then ends the stream with an error (dropping the
 * connection) and cancels the source, so stopping never waits on slow or stalled bodies.
 */
export function endOnAbort(
  source: ReadableStream<Uint8Array>,
  signal: AbortSignal,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  aborted.catch(() => {}); // observed through Promise.race below
  const release = () => signal.removeEventListener("abort", onAbort!);
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await Promise.race([reader.read(), aborted]);
        if (done) {
          release();
          controller.close();
        } else controller.enqueue(value);
      } catch (e) {
        release();
        if (!signal.aborted) throw e; // the source failed: the stream fails with it
        controller.error(e);
        await reader.cancel(e);
      }
    },
    cancel(reason) {
      release();
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}
