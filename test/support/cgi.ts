/** Parsing the output of a CGI program (RFC 3875 §6): a header block, a blank line, the body. */

import { prefixed } from "../../src/proxy/core/streams.ts";
import { concat } from "../../src/git/pktline.ts";

/** The CGI program's output ended or grew too large before its header block was complete. */
export class CgiHeaderError extends Error {
  override name = "CgiHeaderError";
  constructor(reason: string) {
    super(`malformed CGI response: ${reason}`);
  }
}

/** A CGI response split into status, headers and the still-streaming body. */
export interface CgiResponse {
  status: number;
  statusText: string;
  headers: Headers;
  /** The rest of the program's stdout, starting right after the blank line. */
  body: ReadableStream<Uint8Array>;
}

const MAX_HEADER_BYTES = 64 * 1024;

/**
 * Reads the header block from `stdout` and returns it with the remaining output as a stream.
 * Only the header block is buffered; the body is passed through chunk by chunk.
 */
export async function readCgiResponse(stdout: ReadableStream<Uint8Array>): Promise<CgiResponse> {
  const reader = stdout.getReader();
  let buffered: Uint8Array = new Uint8Array(0);
  let split: { headerEnd: number; bodyStart: number } | null = null;
  while (split === null) {
    const { done, value } = await reader.read();
    if (done) {
      reader.releaseLock();
      throw new CgiHeaderError(
        `output ended after ${buffered.byteLength} bytes without a header block`,
      );
    }
    buffered = concat([buffered, value]);
    split = findBlankLine(buffered);
    if (split === null && buffered.byteLength > MAX_HEADER_BYTES) {
      await reader.cancel();
      throw new CgiHeaderError(`no blank line within ${MAX_HEADER_BYTES} bytes`);
    }
  }
  const head = new TextDecoder().decode(buffered.subarray(0, split.headerEnd));
  const { status, statusText, headers } = parseHeaderBlock(head);
  const rest = buffered.subarray(split.bodyStart);
  reader.releaseLock();
  return { status, statusText, headers, body: prefixed(rest, stdout) };
}

/** Parses CGI header lines; `Status:` sets the status, everything else becomes a header. */
export function parseHeaderBlock(
  head: string,
): { status: number; statusText: string; headers: Headers } {
  const headers = new Headers();
  let status = 200;
  let statusText = "OK";
  for (const line of head.split(/\r?\n/)) {
    if (line === "") continue;
    const colon = line.indexOf(":");
    if (colon <= 0) throw new CgiHeaderError(`bad header line ${JSON.stringify(line)}`);
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === "status") {
      const m = /^(\d{3})\s*(.*)$/.exec(value);
      if (!m) throw new CgiHeaderError(`bad Status ${JSON.stringify(value)}`);
      status = Number(m[1]);
      statusText = m[2];
    } else {
      headers.append(name, value);
    }
  }
  return { status, statusText, headers };
}

function findBlankLine(buf: Uint8Array): { headerEnd: number; bodyStart: number } | null {
  for (let i = 0; i < buf.byteLength; i++) {
    if (buf[i] !== 0x0a) continue;
    if (buf[i + 1] === 0x0a) return { headerEnd: i, bodyStart: i + 2 };
    if (buf[i + 1] === 0x0d && buf[i + 2] === 0x0a) return { headerEnd: i, bodyStart: i + 3 };
  }
  return null;
}
