/**
 * Git side-band multiplexing (side-band-64k): inside a run of pkt-lines,
 * the first payload byte names the band: 1 carries pack data, 2 progress
 * text for the user, 3 a fatal error message from the remote.
 *
 * @module
 */

import { GitFormatError, ProtocolRemoteError } from "./errors.ts";
import { MAX_PKT_DATA, type Pkt, type PktLineReader } from "./pktline.ts";

/** A side-band channel number. */
export type Band = 1 | 2 | 3;

/** Band carrying the packfile bytes. */
export const BAND_DATA = 1;
/** Band carrying human-readable progress messages. */
export const BAND_PROGRESS = 2;
/** Band carrying a fatal error message; the transfer is over once it appears. */
export const BAND_ERROR = 3;

/** Largest payload of one side-band packet, excluding the band byte. */
export const MAX_SIDEBAND_DATA = MAX_PKT_DATA - 1;

const decoder = new TextDecoder();

/** The remote reported a fatal error on band 3; `remoteMessage` is its text, without newline. */
export class SidebandRemoteError extends ProtocolRemoteError {
  override name = "SidebandRemoteError";
}

/** Options for {@link demuxSideband} and {@link readSidebandPkt}. */
export interface DemuxOptions {
  /** Receives each band-2 message as text (progress lines keep their `\r`/`\n`). */
  onProgress?: (message: string) => void;
}

/**
 * A packet split into band and payload.
 *
 * @throws {GitFormatError} `"bad-band"` for an empty payload or a band byte other than 1, 2, 3.
 */
export function splitSideband(data: Uint8Array): { band: Band; payload: Uint8Array } {
  if (data.length === 0) {
    throw new GitFormatError("bad-band", "side-band packet has no band designator byte");
  }
  const band = data[0];
  if (band !== BAND_DATA && band !== BAND_PROGRESS && band !== BAND_ERROR) {
    throw new GitFormatError(
      "bad-band",
      `side-band packet has invalid band designator ${band} (expected 1, 2 or 3)`,
    );
  }
  return { band, payload: data.subarray(1) };
}

function errorText(payload: Uint8Array): string {
  return decoder.decode(payload).replace(/\n$/, "");
}

/**
 * Reads packets until one carries band-1 payload, handing band-2 text to
 * `onProgress` on the way. Returns the band-1 payload (possibly empty), or
 * the special packet / `null` (end of stream) that ended the search.
 *
 * @throws {SidebandRemoteError} on a band-3 packet.
 * @throws {GitFormatError} on malformed packets.
 */
export async function readSidebandPkt(
  reader: PktLineReader,
  opts: DemuxOptions = {},
): Promise<Uint8Array | Exclude<Pkt, { type: "data" }> | null> {
  for (;;) {
    const pkt = await reader.read();
    if (pkt === null || pkt.type !== "data") return pkt;
    const { band, payload } = splitSideband(pkt.data);
    if (band === BAND_DATA) return payload;
    if (band === BAND_ERROR) throw new SidebandRemoteError(errorText(payload));
    if (payload.length > 0) opts.onProgress?.(decoder.decode(payload));
  }
}

/**
 * The band-1 bytes of a side-band section, read lazily from `reader`.
 *
 * The stream ends at the first flush (the end of a packfile section),
 * response-end or end of input; the reader is left positioned after it.
 * Band-2 text goes to `onProgress`. The stream errors with
 * {@link SidebandRemoteError} on band 3, {@link GitFormatError} on a bad band
 * byte or a delimiter packet, and with the reader's `PktLineError` on bad
 * framing. Each pull reads only as many packets as needed for one chunk;
 * cancelling the stream cancels the reader. After an error the reader's
 * position is undefined: cancel it to release the source.
 */
export function demuxSideband(
  reader: PktLineReader,
  opts: DemuxOptions = {},
): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        const next = await readSidebandPkt(reader, opts);
        if (next instanceof Uint8Array) {
          if (next.length === 0) continue;
          controller.enqueue(next);
          return;
        }
        if (next !== null && next.type === "delim") {
          throw new GitFormatError(
            "bad-band",
            "unexpected delimiter packet inside a side-band stream",
          );
        }
        controller.close();
        return;
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/**
 * Frames `data` as side-band packets on `band`, split so that no packet
 * exceeds 65520 bytes including its header and band byte. Returns the
 * concatenated packets (empty for empty input).
 */
export function encodeSideband(band: Band, data: Uint8Array): Uint8Array {
  const count = Math.ceil(data.length / MAX_SIDEBAND_DATA);
  const out = new Uint8Array(data.length + count * 5);
  let at = 0;
  for (let from = 0; from < data.length; from += MAX_SIDEBAND_DATA) {
    const part = data.subarray(from, from + MAX_SIDEBAND_DATA);
    putSidebandHeader(out, at, band, part.length);
    out.set(part, at + 5);
    at += part.length + 5;
  }
  return out;
}

/** Writes the 5-byte header (length, band) of a packet carrying `payload` bytes at `out[at]`. */
function putSidebandHeader(out: Uint8Array, at: number, band: Band, payload: number): void {
  const hex = (payload + 5).toString(16).padStart(4, "0");
  for (let i = 0; i < 4; i++) out[at + i] = hex.charCodeAt(i);
  out[at + 4] = band;
}

/**
 * Side-band packets on one band filled to the most a packet holds (65515 bytes of data), from
 * chunks of any size: a stream whose source reads in small chunks (a store's 4 KiB reads) still
 * goes out in few packets.
 */
export class SidebandFiller {
  readonly #band: Band;
  #packet = new Uint8Array(5 + MAX_SIDEBAND_DATA);
  #filled = 0;

  constructor(band: Band = BAND_DATA) {
    this.#band = band;
  }

  /** Adds `chunk`; returns the packets it filled (none while the current one has room). */
  push(chunk: Uint8Array): Uint8Array[] {
    const full: Uint8Array[] = [];
    while (chunk.length > 0) {
      const n = Math.min(chunk.length, MAX_SIDEBAND_DATA - this.#filled);
      this.#packet.set(chunk.subarray(0, n), 5 + this.#filled);
      this.#filled += n;
      chunk = chunk.subarray(n);
      if (this.#filled === MAX_SIDEBAND_DATA) full.push(this.#take());
    }
    return full;
  }

  /** The packet being filled, if it holds anything (the end of the data). */
  flush(): Uint8Array | null {
    return this.#filled === 0 ? null : this.#take();
  }

  #take(): Uint8Array {
    putSidebandHeader(this.#packet, 0, this.#band, this.#filled);
    const packet = this.#packet.subarray(0, this.#filled + 5);
    this.#packet = new Uint8Array(5 + MAX_SIDEBAND_DATA);
    this.#filled = 0;
    return packet;
  }
}

/** Encodes a text message (e.g. progress on band 2) as side-band packets. */
export function encodeSidebandText(band: Band, text: string): Uint8Array {
  return encodeSideband(band, new TextEncoder().encode(text));
}

/**
 * A transform framing every chunk written to it as side-band packets on
 * `band` (default 1). Flush packets are not added: the caller ends the
 * section itself.
 */
export function sidebandMuxStream(band: Band = 1): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      if (chunk.length > 0) controller.enqueue(encodeSideband(band, chunk));
    },
  });
}
