/**
 * Test HTTP servers with bandwidth caps and scripted faults: a static file server with Range
 * support, and a relay that puts the same caps and faults in front of another HTTP server.
 */
import { applyBodyFault, type Fault, FaultBook, type FaultPlan } from "./faults.ts";
import { endOnAbort, serveLoopback } from "./http_server.ts";
import { parseRange } from "./range.ts";
import { countingStream, TrafficCounter, type TrafficStats } from "./stats.ts";
import { burstFor, type Clock, throttle, TokenBucket } from "./throttle.ts";

export type { Fault, FaultPlan } from "./faults.ts";

/** What the servers have in common. */
export interface ShapingOptions {
  /** Cap per response body, in bytes per second (token bucket, burst ≤ 16 KiB). */
  bytesPerSecond?: number;
  /** Faults to inject, by URL path. */
  faults?: FaultPlan;
  /** Time source of caps and stalls (default: real timers; tests of the harness use a virtual one). */
  clock?: Clock;
}

/** Options for {@link startFileServer}. */
export interface FileServerOptions extends ShapingOptions {
  /** URL path → file path, or a function answering undefined for unknown paths. */
  files: Record<string, string> | ((path: string) => string | undefined);
}

/** A running file server or relay. */
export interface ShapingServer extends AsyncDisposable {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  url: string;
  stats: TrafficStats;
  /** Replaces the fault plan; counts start afresh. */
  setFaults(plan: FaultPlan): void;
  /** Ends responses under way and shuts the server; idempotent. */
  stop(): Promise<void>;
}

export type FileServer = ShapingServer;
export type Relay = ShapingServer;

/** Serves files by GET/HEAD with single byte ranges, ETags, caps and faults. */
export function startFileServer(opts: FileServerOptions): Promise<FileServer> {
  const lookup = typeof opts.files === "function"
    ? opts.files
    : (path: string) => (opts.files as Record<string, string>)[path];
  const stats = new TrafficCounter();
  const faults = new FaultBook(opts.faults);
  const server = serveLoopback(async (req, _info, closing) => {
    const { pathname } = new URL(req.url);
    const key = stats.request(req.method, pathname, req.headers);
    if (req.method !== "GET" && req.method !== "HEAD") {
      return new Response("method not allowed\n", { status: 405, headers: { Allow: "GET, HEAD" } });
    }
    const file = lookup(pathname);
    const info = file === undefined ? undefined : await statFile(file);
    if (file === undefined || info === undefined) {
      return new Response("not found\n", { status: 404 });
    }
    const fault = faults.next(pathname);
    const early = faultResponse(fault, info.size);
    if (early) return early;

    const headers = new Headers({
      "Content-Type": "application/octet-stream",
      "Accept-Ranges": "bytes",
      "ETag": `"${info.size.toString(16)}-${(info.mtime?.getTime() ?? 0).toString(16)}"`,
    });
    const range = fault?.kind === "ignore-range"
      ? { kind: "whole" as const }
      : parseRange(req.headers.get("range"), info.size);
    if (range.kind === "unsatisfiable") {
      headers.set("Content-Range", `bytes */${info.size}`);
      return new Response(null, { status: 416, headers });
    }
    const [asked, end] = range.kind === "range" ? [range.start, range.end] : [0, info.size - 1];
    const start = fault?.kind === "wrong-range" && asked > 0 ? asked - 1 : asked;
    headers.set("Content-Length", String(end - start + 1));
    if (range.kind === "range") headers.set("Content-Range", `bytes ${start}-${end}/${info.size}`);
    const status = range.kind === "range" ? 206 : 200;
    if (req.method === "HEAD") return new Response(null, { status, headers });

    const body = shape(await fileSlice(file, start, end + 1), fault, start, true, opts, closing);
    const counted = countingStream(body, (n) => stats.sent(key, n), undefined, stats.bodyStarted());
    return new Response(counted, { status, headers });
  });
  return Promise.resolve(handle(server.url, stats, faults, server.stop));
}

/** Options for {@link startRelay}. */
export type RelayOptions = ShapingOptions;

const HOP_BY_HOP = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
  "expect",
];

/**
 * Forwards every request (method, headers, streamed body) to `target` (an origin URL) and streams
 * the answer back through the same caps and faults. `target` may be a function, read per request:
 * for a server that must itself know the relay's URL, start the relay first, then that server on
 * its own ephemeral port (no port is guessed).
 */
export function startRelay(
  target: string | (() => string),
  opts: RelayOptions = {},
): Promise<Relay> {
  const targetUrl = typeof target === "function" ? target : () => target;
  const stats = new TrafficCounter();
  const faults = new FaultBook(opts.faults);
  const server = serveLoopback(async (req, _info, closing) => {
    const url = new URL(req.url);
    const base = targetUrl().replace(/\/+$/, "");
    const key = stats.request(req.method, url.pathname, req.headers);
    const fault = faults.next(url.pathname);
    const early = faultResponse(fault, undefined);
    if (early) return early;

    const headers = withoutHopByHop(req.headers);
    headers.delete("content-length"); // the body is streamed on, chunked
    // Deno's fetch decodes answers in encodings it asked for; asking for identity keeps the bytes
    // relayed (and counted) exactly as the upstream sends them, Content-Encoding included.
    headers.set("accept-encoding", "identity");
    if (fault?.kind === "ignore-range") headers.delete("range");
    let upstream: Response;
    try {
      upstream = await fetch(`${base}${url.pathname}${url.search}`, {
        method: req.method,
        headers,
        body: req.body,
        redirect: "manual",
        signal: closing,
      });
    } catch (e) {
      if (closing.aborted) throw e;
      return new Response(`relay: upstream ${base} failed: ${(e as Error).message}\n`, {
        status: 502,
      });
    }
    const outHeaders = withoutHopByHop(upstream.headers);
    if (!upstream.body) {
      return new Response(null, { status: upstream.status, headers: outHeaders });
    }
    const rangeStart = Number(
      /^bytes (\d+)-/.exec(upstream.headers.get("content-range") ?? "")?.[1] ?? 0,
    );
    const declared = outHeaders.has("content-length");
    const body = shape(upstream.body, fault, rangeStart, declared, opts, closing);
    const counted = countingStream(body, (n) => stats.sent(key, n), undefined, stats.bodyStarted());
    return new Response(counted, {
      status: upstream.status,
      statusText: upstream.statusText,
      headers: outHeaders,
    });
  });
  return Promise.resolve(handle(server.url, stats, faults, server.stop));
}

function handle(
  url: string,
  stats: TrafficCounter,
  faults: FaultBook,
  stop: () => Promise<void>,
): ShapingServer {
  return {
    url,
    stats,
    setFaults: (plan) => faults.set(plan),
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** The response for faults that replace the content entirely, or undefined. */
function faultResponse(fault: Fault | undefined, size: number | undefined): Response | undefined {
  if (fault?.kind === "status") {
    return new Response(`injected ${fault.status}\n`, { status: fault.status });
  }
  if (fault?.kind === "body") {
    const body = typeof fault.body === "string" ? new TextEncoder().encode(fault.body) : fault.body;
    return new Response(body as Uint8Array<ArrayBuffer>, { status: fault.status ?? 200 });
  }
  if (fault?.kind === "bad-416") {
    const headers = size === undefined ? undefined : { "Content-Range": `bytes */${size}` };
    return new Response(null, { status: 416, headers });
  }
  return undefined;
}

/** Body pipeline: fault, then cap, then an end on server stop. */
function shape(
  body: ReadableStream<Uint8Array>,
  fault: Fault | undefined,
  start: number,
  lengthDeclared: boolean,
  opts: ShapingOptions,
  closing: AbortSignal,
): ReadableStream<Uint8Array> {
  let out = applyBodyFault(body, fault, { start, lengthDeclared, clock: opts.clock });
  if (opts.bytesPerSecond !== undefined) {
    const rate = opts.bytesPerSecond;
    out = throttle(out, new TokenBucket(rate, burstFor(rate), opts.clock));
  }
  return endOnAbort(out, closing);
}

function withoutHopByHop(from: Headers): Headers {
  const headers = new Headers(from);
  for (const name of HOP_BY_HOP) headers.delete(name);
  return headers;
}

async function statFile(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    const info = await Deno.stat(path);
    return info.isFile ? info : undefined;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}

/** A served file got shorter while its body was being streamed. */
export class FileChangedError extends Error {
  override name = "FileChangedError";
  constructor(readonly path: string, readonly missing: number) {
    super(`${path} shrank while being served: ${missing} bytes missing`);
  }
}

const READ_CHUNK = 64 * 1024;

/** Streams bytes [start, end) of `path`, reading only as the consumer pulls. */
async function fileSlice(
  path: string,
  start: number,
  end: number,
): Promise<ReadableStream<Uint8Array>> {
  const file = await Deno.open(path);
  await file.seek(start, Deno.SeekMode.Start);
  let position = start;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (position >= end) {
        file.close();
        controller.close();
        return;
      }
      const buf = new Uint8Array(Math.min(READ_CHUNK, end - position));
      const n = await file.read(buf);
      if (n === null) {
        file.close();
        controller.error(new FileChangedError(path, end - position));
        return;
      }
      position += n;
      controller.enqueue(buf.subarray(0, n));
    },
    cancel() {
      file.close();
    },
  }, { highWaterMark: 0 });
}
