/**
 * Git pkt-line framing (see gitprotocol-common): every packet starts with a
 * four-digit hexadecimal length that counts itself. The lengths 0000, 0001
 * and 0002 are the special flush, delimiter and response-end packets; 0003
 * is invalid; anything from 0004 up to 65520 carries that many bytes minus
 * four of payload.
 *
 * @module
 */

import { GitFormatError } from "./errors.ts";

/** Largest packet Git will send or accept, including the 4-byte length prefix. */
export const MAX_PKT_LENGTH = 65520;
/** Largest payload of one packet (`MAX_PKT_LENGTH` minus the 4-byte prefix). */
export const MAX_PKT_DATA = MAX_PKT_LENGTH - 4;

/** One decoded packet. Data payloads keep their trailing newline, if any. */
export type Pkt =
  | { type: "data"; data: Uint8Array }
  | { type: "flush" }
  | { type: "delim" }
  | { type: "response-end" };

/** The kinds of special (payload-less) packet. */
export type SpecialPktType = "flush" | "delim" | "response-end";

/** Reasons a {@link PktLineError} is raised; also its `code`. */
export type PktLineErrorCode = "bad-length" | "too-long" | "truncated" | "not-data";

/** Malformed pkt-line framing, or a packet of the wrong kind where data was required. */
export class PktLineError extends GitFormatError {
  override name = "PktLineError";
  declare readonly code: PktLineErrorCode;

  constructor(code: PktLineErrorCode, message: string) {
    super(code, message);
  }
}

/** Raised when a {@link PktLineReader} is used after `remainder()` or `cancel()`. */
export class PktLineReaderClosedError extends Error {
  override name = "PktLineReaderClosedError";
  constructor(what: string) {
    super(`PktLineReader: ${what} after the reader was detached or cancelled`);
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const HEX = "0123456789abcdef";

/** The flush packet `0000`: ends a message or a list. */
export const FLUSH_PKT: Uint8Array = encoder.encode("0000");
/** The delimiter packet `0001`: separates sections of a protocol v2 message. */
export const DELIM_PKT: Uint8Array = encoder.encode("0001");
/** The response-end packet `0002`: ends a stateless protocol v2 response. */
export const RESPONSE_END_PKT: Uint8Array = encoder.encode("0002");

const SPECIAL_BYTES: Record<SpecialPktType, Uint8Array> = {
  "flush": FLUSH_PKT,
  "delim": DELIM_PKT,
  "response-end": RESPONSE_END_PKT,
};

/** The wire bytes of a special packet. */
export function specialPktBytes(type: SpecialPktType): Uint8Array {
  return SPECIAL_BYTES[type];
}

function writeHexLength(out: Uint8Array, length: number): void {
  out[0] = HEX.charCodeAt((length >> 12) & 0xf);
  out[1] = HEX.charCodeAt((length >> 8) & 0xf);
  out[2] = HEX.charCodeAt((length >> 4) & 0xf);
  out[3] = HEX.charCodeAt(length & 0xf);
}

/**
 * Frames one data packet. Strings are UTF-8 encoded verbatim: add the
 * trailing `"\n"` yourself where the protocol expects one.
 *
 * @throws {PktLineError} `"too-long"` when the payload exceeds {@link MAX_PKT_DATA}.
 */
export function encodePkt(data: Uint8Array | string): Uint8Array {
  const payload = typeof data === "string" ? encoder.encode(data) : data;
  if (payload.length > MAX_PKT_DATA) {
    throw new PktLineError(
      "too-long",
      `pkt-line payload of ${payload.length} bytes exceeds the maximum of ${MAX_PKT_DATA}`,
    );
  }
  const out = new Uint8Array(payload.length + 4);
  writeHexLength(out, payload.length + 4);
  out.set(payload, 4);
  return out;
}

/** One item for {@link encodePkts}: payload bytes or text (verbatim), or a special packet. */
export type PktInput = string | Uint8Array | SpecialPktType | Pkt;

/**
 * Frames a sequence of packets and concatenates them. The strings `"flush"`,
 * `"delim"` and `"response-end"` stand for the special packets; every other
 * string is a payload, encoded verbatim (no newline is added). To send the
 * literal text `flush` as data, pass bytes or a `{type: "data"}` packet.
 */
export function encodePkts(items: readonly PktInput[]): Uint8Array {
  const parts = items.map(encodeItem);
  return concat(parts);
}

function encodeItem(item: PktInput): Uint8Array {
  if (typeof item === "string") {
    return item in SPECIAL_BYTES ? SPECIAL_BYTES[item as SpecialPktType] : encodePkt(item);
  }
  if (item instanceof Uint8Array) return encodePkt(item);
  return item.type === "data" ? encodePkt(item.data) : SPECIAL_BYTES[item.type];
}

/** Encodes a decoded packet back to its wire form (lower-case hex length). */
export function pktBytes(p: Pkt): Uint8Array {
  return encodeItem(p);
}

/** Concatenates byte arrays into one new array. */
export function concat(parts: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * A data packet's payload as UTF-8 text with one trailing `"\n"` removed.
 *
 * @throws {PktLineError} `"not-data"` for flush, delim and response-end packets.
 */
export function pktText(p: Pkt): string {
  if (p.type !== "data") {
    throw new PktLineError("not-data", `expected a data pkt-line, got a ${p.type} packet`);
  }
  const d = p.data;
  const end = d.length > 0 && d[d.length - 1] === 0x0a ? d.length - 1 : d.length;
  return decoder.decode(d.subarray(0, end));
}

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30; // 0-9
  if (c >= 0x61 && c <= 0x66) return c - 0x57; // a-f
  if (c >= 0x41 && c <= 0x46) return c - 0x37; // A-F
  return -1;
}

function printable(bytes: Uint8Array): string {
  return Array.from(
    bytes,
    (b) => b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`,
  ).join("");
}

/**
 * Decodes a 4-byte pkt-line length header.
 *
 * @returns the total packet length including the header (0, 1, 2 for the
 * special packets, else 4..65520).
 * @throws {PktLineError} `"bad-length"` for non-hex digits or 0003, `"too-long"` above 65520.
 */
export function parsePktLength(header: Uint8Array): number {
  let n = 0;
  for (let i = 0; i < 4; i++) {
    const v = hexDigit(header[i]);
    if (v < 0) {
      throw new PktLineError(
        "bad-length",
        `invalid pkt-line length header "${printable(header.subarray(0, 4))}": not 4 hex digits`,
      );
    }
    n = (n << 4) | v;
  }
  if (n === 3) {
    throw new PktLineError("bad-length", `invalid pkt-line length 0003: no such packet type`);
  }
  if (n > MAX_PKT_LENGTH) {
    throw new PktLineError(
      "too-long",
      `pkt-line length ${n} exceeds the maximum of ${MAX_PKT_LENGTH}`,
    );
  }
  return n;
}

const SPECIAL_PKTS: readonly Pkt[] = [
  Object.freeze({ type: "flush" }),
  Object.freeze({ type: "delim" }),
  Object.freeze({ type: "response-end" }),
];

/**
 * Decodes a complete in-memory buffer of pkt-lines (synchronous counterpart
 * of {@link PktLineReader} for small messages). Payloads are views into `bytes`.
 *
 * @throws {PktLineError} on a malformed header or a buffer ending mid-packet.
 */
export function decodePkts(bytes: Uint8Array): Pkt[] {
  return Array.from(pktSpans(bytes), (span) => span.pkt);
}

/** A packet of an in-memory buffer and where it lies: `bytes.subarray(start, end)`, header included. */
export interface PktSpan {
  pkt: Pkt;
  start: number;
  end: number;
}

/**
 * The packets of `bytes` as {@link decodePkts} reads them, one at a time and each with its place,
 * for byte-level edits of a message passed on as it came (e.g. one argument line left out).
 *
 * @throws {PktLineError} on a malformed header or a buffer ending mid-packet.
 */
export function* pktSpans(bytes: Uint8Array): Generator<PktSpan> {
  let at = 0;
  while (at < bytes.length) {
    if (bytes.length - at < 4) {
      throw new PktLineError(
        "truncated",
        `input ended in the middle of a pkt-line length header (${bytes.length - at} of 4 bytes)`,
      );
    }
    const length = parsePktLength(bytes.subarray(at, at + 4));
    if (length < 4) {
      yield { pkt: SPECIAL_PKTS[length], start: at, end: at + 4 };
      at += 4;
      continue;
    }
    if (bytes.length - at < length) {
      throw new PktLineError(
        "truncated",
        `input ended in the middle of a pkt-line: needed ${length} bytes, got ${bytes.length - at}`,
      );
    }
    const data = bytes.subarray(at + 4, at + length);
    yield { pkt: { type: "data", data }, start: at, end: at + length };
    at += length;
  }
}

/** Names a packet for an error message: `"a flush packet"`, or `"end of input"`. */
export function describePkt(pkt: Pkt | undefined): string {
  return pkt === undefined ? "end of input" : `a ${pkt.type} packet`;
}

/** Packets as given, or decoded from a complete in-memory buffer (see {@link decodePkts}). */
export function toPkts(input: Uint8Array | readonly Pkt[]): readonly Pkt[] {
  return input instanceof Uint8Array ? decodePkts(input) : input;
}

/** A decoded packet with the exact header bytes it was read from. */
interface RawPkt {
  pkt: Pkt | null;
  header: Uint8Array | null;
}

/** The wire bytes a packet was read from (header as received, payload). */
function rawBytes(raw: RawPkt): Uint8Array[] {
  if (raw.pkt === null || raw.header === null) return [];
  return raw.pkt.type === "data" ? [raw.header, raw.pkt.data] : [raw.header];
}

/**
 * Reads pkt-lines from a byte stream, one packet at a time, pulling from the
 * source only as needed.
 *
 * Buffering is bounded: at most the packet being assembled plus the
 * unconsumed tail of one source chunk. A packet that lies entirely inside one
 * chunk is returned as a view (`subarray`) of that chunk without copying.
 *
 * Methods must not be called concurrently (await each call before the next).
 * After a `PktLineError` the position in the stream is undefined; cancel
 * the reader. Errors from the source stream itself propagate unchanged.
 */
export class PktLineReader {
  readonly #source: ReadableStreamDefaultReader<Uint8Array>;
  /** Unconsumed tail of the last chunk pulled from the source. */
  #chunk: Uint8Array = new Uint8Array(0);
  #eof = false;
  #detached = false;
  /** A packet returned by `peek()` but not yet by `read()`. */
  #peeked: RawPkt | undefined;

  /** Wraps `source`; the reader takes the source's lock. */
  constructor(source: ReadableStream<Uint8Array>) {
    this.#source = source.getReader();
  }

  /**
   * The next packet, or `null` at a clean end of stream (exactly at a packet
   * boundary).
   *
   * @throws {PktLineError} on a malformed header or a stream that ends mid-packet.
   */
  async read(): Promise<Pkt | null> {
    this.#assertUsable("read()");
    if (this.#peeked) {
      const { pkt } = this.#peeked;
      this.#peeked = undefined;
      return pkt;
    }
    return (await this.#readRaw()).pkt;
  }

  /** The packet the next `read()` will return, without consuming it. */
  async peek(): Promise<Pkt | null> {
    this.#assertUsable("peek()");
    this.#peeked ??= await this.#readRaw();
    return this.#peeked.pkt;
  }

  /**
   * Reads a data packet and returns it as text (see {@link pktText}).
   *
   * @throws {PktLineError} `"not-data"` for a special packet, `"truncated"` at end of stream.
   */
  async readDataText(): Promise<string> {
    const p = await this.read();
    if (p === null) {
      throw new PktLineError("truncated", "stream ended where a data pkt-line was expected");
    }
    return pktText(p);
  }

  /**
   * The raw bytes not yet consumed by `read()`: a peeked packet, then the
   * buffered tail, then the rest of the source, pulled on demand. Cancelling
   * the returned stream cancels the source. The reader cannot be used
   * afterwards.
   */
  remainder(): ReadableStream<Uint8Array> {
    this.#assertUsable("remainder()");
    this.#detached = true;
    const pending: Uint8Array[] = [];
    if (this.#peeked) pending.push(...rawBytes(this.#peeked));
    pending.push(this.#chunk);
    this.#peeked = undefined;
    this.#chunk = new Uint8Array(0);
    const source = this.#source;
    const eof = this.#eof;
    return new ReadableStream<Uint8Array>({
      async pull(controller) {
        let next = pending.shift();
        while (next && next.length === 0) next = pending.shift();
        if (next) {
          controller.enqueue(next);
          return;
        }
        if (eof) {
          controller.close();
          return;
        }
        // Skip empty chunks: a pull must enqueue or close, or readers stall.
        for (;;) {
          const { done, value } = await source.read();
          if (done) {
            controller.close();
            return;
          }
          if (value.length > 0) {
            controller.enqueue(value);
            return;
          }
        }
      },
      cancel(reason) {
        return source.cancel(reason);
      },
    }, { highWaterMark: 0 });
  }

  /** Cancels the underlying source and releases buffered data. */
  async cancel(reason?: unknown): Promise<void> {
    if (this.#detached) return;
    this.#detached = true;
    this.#peeked = undefined;
    this.#chunk = new Uint8Array(0);
    await this.#source.cancel(reason);
  }

  #assertUsable(what: string): void {
    if (this.#detached) throw new PktLineReaderClosedError(what);
  }

  async #readRaw(): Promise<RawPkt> {
    if (this.#chunk.length === 0 && !(await this.#pull())) return { pkt: null, header: null };
    // Chunks are never written to, so views stay valid for remainder().
    const header = await this.#take(4, "length header");
    const length = parsePktLength(header);
    if (length < 4) return { pkt: SPECIAL_PKTS[length], header };
    const data = await this.#take(length - 4, "payload");
    return { pkt: { type: "data", data }, header };
  }

  /**
   * Returns exactly `n` bytes: a view when they lie in the current chunk,
   * else a copy assembled from as many chunks as needed.
   *
   * @throws {PktLineError} `"truncated"` if the stream ends first.
   */
  async #take(n: number, what: string): Promise<Uint8Array> {
    if (this.#chunk.length >= n) return this.#consume(n);
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      if (this.#chunk.length === 0 && !(await this.#pull())) {
        throw new PktLineError(
          "truncated",
          `stream ended inside a pkt-line ${what}: got ${filled} of ${n} bytes`,
        );
      }
      const part = this.#consume(Math.min(n - filled, this.#chunk.length));
      out.set(part, filled);
      filled += part.length;
    }
    return out;
  }

  #consume(n: number): Uint8Array {
    const part = this.#chunk.subarray(0, n);
    this.#chunk = this.#chunk.subarray(n);
    return part;
  }

  /** Pulls the next non-empty chunk into `#chunk`; false at end of stream. */
  async #pull(): Promise<boolean> {
    while (!this.#eof) {
      const { done, value } = await this.#source.read();
      if (done) {
        this.#eof = true;
        break;
      }
      if (value.length > 0) {
        this.#chunk = value;
        return true;
      }
    }
    return false;
  }
}

/**
 * A readable/writable pair that decodes bytes written to `writable` into
 * packets on `readable`; usable with `pipeThrough`. Decoding errors error the
 * readable side.
 */
export function pktLineStream(): ReadableWritablePair<Pkt, Uint8Array> {
  const bytes = new TransformStream<Uint8Array, Uint8Array>();
  const reader = new PktLineReader(bytes.readable);
  const readable = new ReadableStream<Pkt>({
    async pull(controller) {
      const p = await reader.read();
      if (p === null) controller.close();
      else controller.enqueue(p);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
  return { writable: bytes.writable, readable };
}
