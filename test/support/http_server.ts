/** Plumbing shared by the origin, file server and relay: a loopback server that stops promptly. */

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
  /**
   * Ends every response under way (the handlers' `closing` signal), lets them finish for up to
   * {@link STOP_GRACE_MS}, then drops every connection left; idempotent. It never waits on a
   * client: one that stopped reading cannot hold it.
   */
  stop(): Promise<void>;
}

/**
 * How long stop() lets ended responses finish before it drops their connections. Only a response
 * stuck behind a client that does not read takes that long; the others end at once.
 */
export const STOP_GRACE_MS = 1000;

/** Serves `handler` on 127.0.0.1 with an ephemeral port. */
export function serveLoopback(handler: TestHandler): LoopbackServer {
  const closing = new AbortController();
  // Aborting Deno.serve's own signal closes the server with its connections. Its graceful
  // `shutdown()` instead waits for every response to be delivered, i.e. for each client to read:
  // a client that never does (a test holding a body unread) made stop() hang (issue 21).
  const dropping = new AbortController();
  const delivering = new Set<Promise<void>>();
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {}, signal: dropping.signal },
    (req, info) => {
      const delivered: Promise<void> = info.completed.catch(() => {}).finally(() =>
        delivering.delete(delivered)
      );
      delivering.add(delivered);
      return handler(req, info, closing.signal);
    },
  );
  let stopped: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    stop: () =>
      stopped ??= (async () => {
        closing.abort(new ServerStopped());
        let timer: ReturnType<typeof setTimeout> | undefined;
        const grace = new Promise<void>((resolve) => timer = setTimeout(resolve, STOP_GRACE_MS));
        await Promise.race([Promise.all(delivering), grace]);
        clearTimeout(timer);
        dropping.abort();
        await server.finished;
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
