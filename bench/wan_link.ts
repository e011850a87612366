/**
 * A simulated network link on loopback: a TCP relay between clients and one server that adds what
 * a wide-area path costs and loopback does not:
 *   - one-way delay per direction (half the round-trip time each way);
 *   - bandwidth shared by every connection (one token bucket per direction for the whole link);
 *   - a TCP handshake per connection (its first byte leaves one round trip after the connect);
 *   - slow start per connection and direction: a window of `initialWindow` segments per round
 *     trip, doubling each round trip until the shared rate binds (no loss is modelled, so it
 *     never shrinks; kept-alive connections keep their window).
 * It counts what crossed it (connections, bytes, request/response turns) and records a timeline
 * of the round trips it saw, from which {@link LinkStats.criticalRoundTrips} estimates how many
 * of them were serial (on the critical path).
 *
 *   await using wan = await startLink("127.0.0.1:8080", { rttMs: 80, mbitPerSecond: 100 });
 *   // clients connect to wan.url (http://127.0.0.1:PORT) instead of the server
 */
import { burstFor, TokenBucket } from "../test/support/throttle.ts";

/** The shape of a link. */
export interface LinkOptions {
  /** Round-trip time in ms (each direction gets half). */
  rttMs: number;
  /** Bandwidth of each direction in Mbit/s, shared by all connections. */
  mbitPerSecond: number;
  /** Segment size in bytes (slow start counts in segments). Default 1448. */
  segment?: number;
  /** Initial congestion window in segments. Default 10. */
  initialWindow?: number;
  /** Model the handshake (default true). */
  handshake?: boolean;
}

/** One round trip the link saw: a handshake or a request answered (relay-side times, ms). */
export interface RoundTrip {
  kind: "handshake" | "turn";
  conn: number;
  start: number;
  end: number;
}

/** What crossed the link since the last reset. */
export interface LinkStats {
  connections: number;
  bytesUp: number;
  bytesDown: number;
  /** Request/response turns (a client→server burst answered by the server). */
  turns: number;
  roundTrips: RoundTrip[];
  /**
   * The longest chain of round trips that did not overlap in time: an estimate of the serial
   * round trips on the critical path (concurrent ones count once).
   */
  criticalRoundTrips: number;
}

/** A running link. */
export interface Link extends AsyncDisposable {
  /** `http://127.0.0.1:PORT`: where clients connect instead of the server. */
  url: string;
  stats(): LinkStats;
  reset(): void;
  stop(): Promise<void>;
}

const CHUNK = 64 * 1024;

/** Starts a link to `target` (`host:port`). */
export function startLink(target: string, opts: LinkOptions): Link {
  const colon = target.lastIndexOf(":");
  const [hostname, port] = [target.slice(0, colon), Number(target.slice(colon + 1))];
  const oneWay = opts.rttMs / 2;
  const rate = opts.mbitPerSecond * 1e6 / 8;
  const segment = opts.segment ?? 1448;
  const initialWindow = (opts.initialWindow ?? 10) * segment;
  const up = new TokenBucket(rate, burstFor(rate));
  const down = new TokenBucket(rate, burstFor(rate));
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  let t0 = performance.now();
  const now = () => performance.now() - t0;
  let counts = { connections: 0, bytesUp: 0, bytesDown: 0, turns: 0 };
  let roundTrips: RoundTrip[] = [];
  let nextId = 0;

  const serve = async (client: Deno.Conn) => {
    const id = nextId++;
    counts.connections++;
    let server: Deno.Conn;
    try {
      server = await Deno.connect({ hostname, port });
    } catch {
      client.close();
      return;
    }
    conns.add(client);
    conns.add(server);
    const opened = performance.now();
    if (opts.handshake !== false) {
      roundTrips.push({ kind: "handshake", conn: id, start: now(), end: now() + opts.rttMs });
    }
    // Turn tracking: a turn starts with the first request byte after the server last spoke and
    // ends with the server's next first byte (as seen at the client's side of the link).
    let pending: RoundTrip | undefined;
    const onUp = () => {
      if (!pending) pending = { kind: "turn", conn: id, start: now(), end: 0 };
    };
    const onDown = () => {
      if (pending) {
        pending.end = now() + oneWay; // the client sees it one way later
        roundTrips.push(pending);
        counts.turns++;
        pending = undefined;
      }
    };
    const handshakeDone = opts.handshake === false ? 0 : opened + opts.rttMs;
    await Promise.allSettled([
      pump(client, server, up, handshakeDone, (n) => {
        onUp();
        counts.bytesUp += n;
      }),
      pump(server, client, down, 0, (n) => {
        onDown();
        counts.bytesDown += n;
      }),
    ]);
    for (const c of [client, server]) {
      conns.delete(c);
      try {
        c.close();
      } catch { /* already closed */ }
    }
  };

  /**
   * Copies `from` to `to`: each piece waits for the shared bucket and the connection's window,
   * then is delivered `oneWay` ms after it was sent. Reading stops while more than a window's
   * worth is in flight, so backpressure reaches the sender.
   */
  const pump = async (
    from: Deno.Conn,
    to: Deno.Conn,
    bucket: TokenBucket,
    notBefore: number,
    seen: (n: number) => void,
  ) => {
    let window = initialWindow;
    let roundStart = -Infinity;
    let sentInRound = 0;
    const queue: { at: number; bytes: Uint8Array }[] = [];
    let queued = 0;
    let wake: (() => void) | undefined;
    let readerDone = false;
    let failed = false;
    const writer = (async () => {
      for (;;) {
        const item = queue.shift();
        if (!item) {
          if (readerDone) break;
          await new Promise<void>((r) => wake = r);
          continue;
        }
        const wait = item.at - performance.now();
        if (wait > 0) await sleep(wait);
        try {
          let off = 0;
          while (off < item.bytes.byteLength) off += await to.write(item.bytes.subarray(off));
        } catch {
          failed = true;
          break;
        }
        queued -= item.bytes.byteLength;
        wake?.();
      }
      if (!failed) await to.closeWrite().catch(() => {});
    })();
    const buf = new Uint8Array(CHUNK);
    try {
      for (;;) {
        const n = await from.read(buf).catch(() => null);
        if (n === null || failed) break;
        const wait = notBefore - performance.now();
        if (wait > 0) await sleep(wait);
        seen(n);
        let off = 0;
        while (off < n) {
          const t = performance.now();
          if (t - roundStart >= opts.rttMs) {
            // A new round trip: the window grows by the acks of the last one (doubling).
            if (roundStart !== -Infinity && sentInRound >= window) window *= 2;
            roundStart = t;
            sentInRound = 0;
          }
          if (sentInRound >= window) {
            await sleep(roundStart + opts.rttMs - t);
            continue;
          }
          const want = Math.min(n - off, window - sentInRound);
          const take = await bucket.takeUpTo(want, Math.min(want, bucket.burst / 4));
          sentInRound += take;
          queue.push({ at: performance.now() + oneWay, bytes: buf.slice(off, off + take) });
          queued += take;
          off += take;
          const w = wake;
          wake = undefined;
          w?.();
          while (queued > Math.max(window, 4 * CHUNK) && !failed) {
            await new Promise<void>((r) => wake = r);
          }
        }
      }
    } finally {
      readerDone = true;
      const w = wake;
      wake = undefined;
      w?.();
      await writer;
    }
  };

  const accepting = (async () => {
    for (;;) {
      let conn: Deno.Conn;
      try {
        conn = await listener.accept();
      } catch {
        return;
      }
      serve(conn).catch(() => {});
    }
  })();

  const addr = listener.addr as Deno.NetAddr;
  const stop = async () => {
    try {
      listener.close();
    } catch { /* closed */ }
    for (const c of conns) {
      try {
        c.close();
      } catch { /* closed */ }
    }
    await accepting;
  };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    stats: () => ({
      ...counts,
      roundTrips: [...roundTrips],
      criticalRoundTrips: longestChain(roundTrips),
    }),
    reset: () => {
      counts = { connections: 0, bytesUp: 0, bytesDown: 0, turns: 0 };
      roundTrips = [];
      t0 = performance.now();
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** The most round trips that follow one another without overlapping (interval scheduling). */
export function longestChain(trips: RoundTrip[]): number {
  const sorted = trips.filter((t) => t.end > t.start).sort((a, b) => a.end - b.end);
  let count = 0;
  let last = -Infinity;
  for (const t of sorted) {
    if (t.start >= last) {
      count++;
      last = t.end;
    }
  }
  return count;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.max(0, ms)));
}
