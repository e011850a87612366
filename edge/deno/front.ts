/**
 * The TCP front of the Deno server: it accepts the public connections, caps how many are open,
 * and closes those that send no request headers in time or sit idle between requests; the bytes
 * are relayed to `Deno.serve` on a loopback port. `Deno.serve` has no connection cap and no
 * header or idle timeout, so an attacker's idle sockets would otherwise pile up until the process
 * runs out of file descriptors.
 *
 * Each public connection has its own connection to the inner server, so the inner server's
 * handler finds its public connection by the remote port (`track`) and tells the front when a
 * request starts and when its response has been sent: between requests the front applies the
 * header and idle deadlines; while a response is being sent, none (a slow but progressing pack
 * download is never cut), except that a write the client does not take for the idle timeout
 * (it stopped reading) ends the connection.
 */
import type { Metrics } from "../../src/proxy/core/metrics.ts";

export interface FrontLimits {
  /** Public connections open at once; beyond it a connection is answered 503 and closed. */
  maxConnections: number;
  /** A request's headers must arrive within this, counted from the connection's start or from
   * the first byte of a later request on it. */
  headerTimeoutMs: number;
  /** A kept-alive connection with no request in flight is closed after this; also how long a
   * response write may wait for a client that does not read. */
  idleTimeoutMs: number;
}

export interface FrontOptions extends FrontLimits {
  hostname: string;
  port: number;
  /** The inner `Deno.serve`'s loopback port. */
  upstreamPort: number;
  metrics: Metrics;
}

/** One public connection as the inner server's handler sees it. */
export interface TrackedConnection {
  /** A request reached the handler; `completed` settles once its response is sent or failed. */
  request(completed: Promise<void>): void;
  /** Accepted after the drain began (edge/deno/drain.ts): it may only finish clones. */
  readonly late: boolean;
  /** Its client was handed `uris` packfile URIs: it is mid-clone until it has asked for them. */
  clones(uris: number): void;
  /** Its client asks for a pack (one of those it was handed, presumably). */
  downloadsPack(): void;
}

/** What the front's connections are doing, for the drain. */
export interface FrontActivity {
  open: number;
  /** Requests whose responses the inner server has not finished sending. */
  requests: number;
  /** Connections with a write to the client under way. */
  writing: number;
  /**
   * Pack downloads that clients (by address) were handed URIs for and have not asked for yet,
   * over the last {@link CLONE_MEMORY_MS}: clones under way.
   */
  cloning: number;
  /** When a request last started or ended, or bytes last went to a client (ms since epoch). */
  lastActivity: number;
}

type Phase = "headers" | "request" | "waiting";

const REFUSAL = new TextEncoder().encode(
  "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\n" +
    "Retry-After: 1\r\nContent-Length: 32\r\n\r\ntoo many connections, try again\n",
);

/** How long a client's pending pack downloads count as a clone under way. */
export const CLONE_MEMORY_MS = 5 * 60_000;

/** Per client address: pack URIs handed out and not yet asked for. */
class CloneLedger {
  readonly #pending = new Map<string, { count: number; at: number }>();

  handed(host: string, uris: number): void {
    const entry = this.#pending.get(host);
    this.#pending.set(host, { count: (entry?.count ?? 0) + uris, at: Date.now() });
  }

  asked(host: string): void {
    const entry = this.#pending.get(host);
    if (!entry) return;
    if (--entry.count <= 0) this.#pending.delete(host);
  }

  /** Pending downloads handed out within {@link CLONE_MEMORY_MS}; older entries are forgotten. */
  pending(): number {
    let sum = 0;
    for (const [host, entry] of this.#pending) {
      if (Date.now() - entry.at > CLONE_MEMORY_MS) this.#pending.delete(host);
      else sum += entry.count;
    }
    return sum;
  }
}

class Connection implements TrackedConnection {
  phase: Phase = "headers";
  /** When the current phase started. */
  since = Date.now();
  /** When the pending write to the client started (0: none pending). */
  writingSince = 0;
  /** When the last write to the client finished. The inner server counts a response as sent
   * once it is in the loopback socket; the front may still be relaying it to a slow client. */
  lastSent = 0;
  active = 0;
  closed = false;
  pumps: Promise<void> = Promise.resolve();
  /** When a request last started or ended here. */
  lastRequest = Date.now();

  constructor(
    readonly client: Deno.Conn,
    readonly upstream: Deno.Conn,
    readonly onClose: (conn: Connection) => void,
    readonly ledger: CloneLedger,
    readonly late = false,
  ) {}

  clones(uris: number): void {
    this.ledger.handed(this.clientHost, uris);
  }

  downloadsPack(): void {
    this.ledger.asked(this.clientHost);
  }

  get clientHost(): string {
    return (this.client.remoteAddr as Deno.NetAddr).hostname;
  }

  request(completed: Promise<void>): void {
    this.active++;
    this.phase = "request";
    this.lastRequest = Date.now();
    const done = () => {
      this.lastRequest = Date.now();
      if (--this.active > 0) return;
      this.phase = "waiting";
      this.since = Date.now();
    };
    completed.then(done, done);
  }

  /** Bytes from the client: the first of a new request starts its header deadline. */
  clientBytes(): void {
    if (this.phase === "waiting") {
      this.phase = "headers";
      this.since = Date.now();
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const c of [this.client, this.upstream]) {
      try {
        c.close();
      } catch { /* already closed */ }
    }
    this.onClose(this);
  }
}

/**
 * Which deadline `conn` has passed, if any: a write the client has not taken for the idle
 * timeout ("send"); a request's headers not complete within the header timeout ("header"); no
 * request under way and nothing sent for the idle timeout ("idle").
 */
function deadlinePassed(
  conn: Connection,
  now: number,
  headerTimeoutMs: number,
  idleTimeoutMs: number,
): "send" | "header" | "idle" | undefined {
  if (conn.writingSince) return now - conn.writingSince > idleTimeoutMs ? "send" : undefined;
  if (conn.phase === "headers" && now - conn.since > headerTimeoutMs) return "header";
  const quietSince = Math.max(conn.since, conn.lastSent);
  if (conn.phase === "waiting" && now - quietSince > idleTimeoutMs) return "idle";
  return undefined;
}

/**
 * Buffer sizes of the relay towards the client: it starts small, and a read that fills it (a bulk
 * transfer, such as a pack) doubles it up to the most. Each read and write is a trip through the
 * runtime, so with 256 KiB the edge took ~30% less CPU than with 64 KiB for 8 parallel 16 MiB pack
 * downloads here (0.10 against 0.14 s); 1024 connections in bulk at once hold 256 MiB of buffers.
 */
export const TO_CLIENT_BUFFER = { initial: 64 << 10, most: 256 << 10 } as const;

/**
 * Copies `from` to `to` until either ends; `before` runs on each chunk read. The buffer starts at
 * `buffer.initial` bytes and doubles, up to `buffer.most`, each time a read fills it.
 */
async function relay(
  from: Deno.Conn,
  to: Deno.Conn,
  buffer: { initial: number; most: number },
  before: () => void,
  writing?: (pending: boolean) => void,
): Promise<void> {
  let buf = new Uint8Array(buffer.initial);
  for (;;) {
    const n = await from.read(buf);
    if (n === null) return;
    before();
    writing?.(true);
    for (let off = 0; off < n;) off += await to.write(buf.subarray(off, n));
    writing?.(false);
    if (n === buf.length && buf.length < buffer.most) {
      buf = new Uint8Array(Math.min(buffer.most, buf.length * 2));
    }
  }
}

export class Front {
  readonly #listener: Deno.TcpListener;
  readonly #opts: FrontOptions;
  readonly #byUpstreamPort = new Map<number, Connection>();
  readonly #open = new Set<Connection>();
  readonly #sweep: ReturnType<typeof setInterval>;
  readonly #accepting: Promise<void>;
  #closing = false;
  #draining = false;
  readonly #ledger = new CloneLedger();
  /** When a connection last closed. */
  #lastClosed = 0;
  /** Accepted connections still connecting to the inner server (they count against the cap). */
  #connecting = 0;

  constructor(opts: FrontOptions) {
    this.#opts = opts;
    this.#listener = Deno.listen({ hostname: opts.hostname, port: opts.port });
    opts.metrics.set("gitedge_connections_open", 0);
    const shortest = Math.min(opts.headerTimeoutMs, opts.idleTimeoutMs);
    this.#sweep = setInterval(() => this.#expire(), Math.max(50, Math.min(1000, shortest / 8)));
    this.#accepting = this.#acceptLoop();
  }

  get addr(): Deno.NetAddr {
    return this.#listener.addr;
  }

  /** The public connection relayed through the inner connection from `remote`, if any. */
  track(remote: Deno.Addr): TrackedConnection | undefined {
    return remote.transport === "tcp" ? this.#byUpstreamPort.get(remote.port) : undefined;
  }

  async #acceptLoop(): Promise<void> {
    let backoff = 0;
    while (!this.#closing) {
      let client: Deno.TcpConn;
      try {
        client = await this.#listener.accept();
        backoff = 0;
      } catch (error) {
        if (this.#closing) return;
        // Out of file descriptors ("Too many open files"): the connection stays in the backlog;
        // wait for descriptors to free up rather than end the process.
        backoff = Math.min(backoff ? backoff * 2 : 50, 1000);
        if (backoff === 50) console.error(`gitedge: accepting a connection failed (${error})`);
        this.#opts.metrics.inc("gitedge_connections_refused_total", 1, { reason: "accept" });
        await new Promise((r) => setTimeout(r, backoff));
        continue;
      }
      if (this.#open.size + this.#connecting >= this.#opts.maxConnections) {
        this.#refuse(client, "cap");
        continue;
      }
      this.#connecting++;
      void this.#start(client).finally(() => this.#connecting--);
    }
  }

  #refuse(client: Deno.Conn, reason: string): void {
    this.#opts.metrics.inc("gitedge_connections_refused_total", 1, { reason });
    client.write(REFUSAL).catch(() => {}).finally(() => {
      try {
        client.close();
      } catch { /* closed */ }
    });
  }

  async #start(client: Deno.TcpConn): Promise<void> {
    let upstream: Deno.TcpConn;
    try {
      upstream = await Deno.connect({ hostname: "127.0.0.1", port: this.#opts.upstreamPort });
    } catch {
      this.#refuse(client, "upstream");
      return;
    }
    if (this.#closing) {
      client.close();
      upstream.close();
      return;
    }
    // Each relayed write goes out at once. With Nagle's algorithm a response's body, written after
    // its headers, waited for the client's delayed acknowledgement of them: ~20 ms per request
    // (bench/deno_front.ts), on every fetch, ls-refs and pack request.
    for (const c of [client, upstream]) c.setNoDelay(true);
    const port = (upstream.localAddr as Deno.NetAddr).port;
    const conn = new Connection(
      client,
      upstream,
      (c) => {
        this.#open.delete(c);
        this.#byUpstreamPort.delete(port);
        this.#opts.metrics.set("gitedge_connections_open", this.#open.size);
        this.#lastClosed = Date.now();
        if (this.#open.size === 0) {
          this.#emptied?.resolve();
          this.#emptied = undefined;
        }
      },
      this.#ledger,
      this.#draining,
    );
    this.#open.add(conn);
    this.#byUpstreamPort.set(port, conn);
    this.#opts.metrics.set("gitedge_connections_open", this.#open.size);
    const toUpstream = relay(
      client,
      upstream,
      { initial: 16 << 10, most: 16 << 10 },
      () => conn.clientBytes(),
    ).then(
      // The client finished sending: let the inner server see it, the response may still come.
      () => upstream.closeWrite().catch(() => conn.close()),
      () => conn.close(),
    );
    const toClient = relay(upstream, client, TO_CLIENT_BUFFER, () => {}, (pending) => {
      if (!pending) conn.lastSent = Date.now();
      conn.writingSince = pending ? Date.now() : 0;
    }).catch(() => {}).finally(() => conn.close());
    conn.pumps = Promise.all([toUpstream, toClient]).then(() => {});
  }

  /** Closes connections past their deadline. */
  #expire(): void {
    const now = Date.now();
    const { headerTimeoutMs, idleTimeoutMs, metrics } = this.#opts;
    for (const conn of this.#open) {
      const kind = deadlinePassed(conn, now, headerTimeoutMs, idleTimeoutMs);
      if (kind === undefined) continue;
      metrics.inc("gitedge_connections_timed_out_total", 1, { kind });
      conn.close();
    }
  }

  /** From now on, connections accepted are marked `late` (the drain lets them finish clones). */
  beginDrain(): void {
    this.#draining = true;
  }

  /** What the connections are doing now. */
  activity(): FrontActivity {
    let requests = 0;
    let writing = 0;
    const cloning = this.#ledger.pending();
    let lastActivity = this.#lastClosed;
    for (const conn of this.#open) {
      requests += conn.active;
      if (conn.writingSince) writing++;
      lastActivity = Math.max(lastActivity, conn.lastRequest, conn.lastSent);
    }
    return { open: this.#open.size + this.#connecting, requests, writing, cloning, lastActivity };
  }

  #emptied: PromiseWithResolvers<void> | undefined;

  /** Resolves once no connection is open (each ends when its relays do). */
  allClosed(): Promise<void> {
    if (this.#open.size === 0) return Promise.resolve();
    this.#emptied ??= Promise.withResolvers<void>();
    return this.#emptied.promise;
  }

  /** Stops accepting. Open connections stay until `closeAll`. */
  async stopAccepting(): Promise<void> {
    this.#closing = true;
    try {
      this.#listener.close();
    } catch { /* closed */ }
    await this.#accepting;
  }

  /** Closes every connection and the deadline sweep; resolves once the relays have ended. */
  async closeAll(): Promise<void> {
    await this.stopAccepting();
    clearInterval(this.#sweep);
    const pumps = [...this.#open].map((c) => c.pumps);
    for (const conn of [...this.#open]) conn.close();
    await Promise.all(pumps);
  }
}
