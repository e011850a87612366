/**
 * HTTP/1.1 over a raw loopback socket: the request target goes on the wire byte for byte, where
 * `fetch` would normalise it (`/../x` becomes `/x`), so path guards can be reached.
 */
import { concatBytes } from "./streams.ts";

/** A raw response: status code and the body as text (close-delimited or with a length). */
export interface RawResponse {
  status: number;
  headers: string;
  body: string;
}

/** Sends `GET <target> HTTP/1.1` to `baseUrl` (an http://127.0.0.1:PORT URL) and reads the answer. */
export async function rawGet(baseUrl: string, target: string): Promise<RawResponse> {
  const url = new URL(baseUrl);
  if (url.protocol !== "http:" || url.hostname !== "127.0.0.1") {
    throw new Error(`rawGet is for loopback http only, not ${baseUrl}`);
  }
  const conn = await Deno.connect({ hostname: url.hostname, port: Number(url.port) });
  try {
    const request = `GET ${target} HTTP/1.1\r\nHost: ${url.host}\r\n` +
      `User-Agent: git/2.39-test\r\nConnection: close\r\n\r\n`;
    await writeAll(conn, new TextEncoder().encode(request));
    const chunks: Uint8Array[] = [];
    const buf = new Uint8Array(16 * 1024);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      chunks.push(buf.slice(0, n));
    }
    const text = new TextDecoder().decode(concatBytes(chunks));
    const split = text.indexOf("\r\n\r\n");
    const head = split < 0 ? text : text.slice(0, split);
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? NaN);
    let body = split < 0 ? "" : text.slice(split + 4);
    if (/^transfer-encoding:\s*chunked/im.test(head)) body = unchunk(body);
    return { status, headers: head, body };
  } finally {
    conn.close();
  }
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
}

/** Decodes a chunked body (text: sizes are hex lines). */
function unchunk(body: string): string {
  let out = "";
  let rest = body;
  for (;;) {
    const eol = rest.indexOf("\r\n");
    if (eol < 0) return out;
    const size = parseInt(rest.slice(0, eol), 16);
    if (!(size > 0)) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}
