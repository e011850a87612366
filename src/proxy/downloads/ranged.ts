/**
 * Ranged responses for objects served from the store (packs, bundles): the parsing of a single
 * `Range: bytes=…` header and the resume-at-end case git http-fetch sends.
 */
export interface ParsedRange {
  offset: number;
  length: number;
}

/**
 * Parses a single `bytes=` range against an object of `size` bytes: the range, `"unsatisfiable"`,
 * or `undefined` when the header is absent or not a single byte range (serve the whole object).
 */
export function parseRange(
  header: string | null,
  size: number,
): ParsedRange | "unsatisfiable" | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0) return "unsatisfiable";
    const offset = Math.max(0, size - suffix);
    return { offset, length: size - offset };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return "unsatisfiable";
  return { offset: start, length: end - start + 1 };
}

/** Whether `header` is `bytes=<size>-` for an object of `size` (> 0) bytes: a resume at the end. */
export function resumesAtEnd(header: string | null, size: number): boolean {
  const m = /^bytes=(\d+)-$/.exec(header?.trim() ?? "");
  return m !== null && size > 0 && Number(m[1]) === size;
}

/** A byte range of an object: `length` bytes from `offset`. */
export type ByteRange = ParsedRange;

/** An object the edge serves with Range, If-Range, an ETag and immutable caching. */
export interface RangedObject {
  /** Its size in bytes. */
  size: number;
  /** Its content type. */
  contentType: string;
  /** Its strong ETag, quoted: it names the content, so `If-Range` compares it as it is. */
  etag: string;
  /** How long a client may keep it (`private, max-age=…, immutable`), in seconds (>= 0). */
  maxAgeSeconds: number;
  /** Whether byte ranges are served (`accept-ranges: bytes`); otherwise always whole (`none`). */
  ranges: boolean;
  /**
   * Whether `bytes=<size>-` (git http-fetch resuming a complete `.temp` file) is answered with an
   * empty 204 rather than 416.
   */
  emptyResumeAtEnd?: boolean;
  /** Its bytes, or the range of them; null when it is gone from the store (a 404). */
  open(range: ByteRange | undefined): Promise<ReadableStream<Uint8Array> | null>;
  /** The 404's message when {@link RangedObject.open} finds it gone. */
  gone: string;
  /** Told the number of bytes handed out, once, when a body is (not for HEAD or 416). */
  served?(length: number): void;
}

/**
 * The response to `request` (GET or HEAD) for `obj`: 200 whole, 206 for a single satisfiable
 * range (unless `If-Range` names another ETag: then whole), 416 for an unsatisfiable one, and with
 * {@link RangedObject.emptyResumeAtEnd} an empty 204 for a resume at the very end. HEAD gets the
 * same status and headers, no body.
 */
export async function rangedResponse(request: Request, obj: RangedObject): Promise<Response> {
  const { size } = obj;
  const headers = new Headers({
    "content-type": obj.contentType,
    "accept-ranges": obj.ranges ? "bytes" : "none",
    "etag": obj.etag,
    "cache-control": `private, max-age=${Math.max(0, obj.maxAgeSeconds)}, immutable`,
  });
  const header = obj.ranges ? request.headers.get("range") : null;
  if (obj.emptyResumeAtEnd && resumesAtEnd(header, size)) {
    // git http-fetch resumes from the length of its `.temp` file, so a download cut off right
    // after the last byte comes back as `bytes=<size>-`. git >= 2.45 goes on after a 416 and
    // indexes the file it has; git 2.39 dies on it. Nothing remains to send: an empty 204 lets
    // every git index its complete file. Not cacheable: it is an answer to this range only.
    headers.set("content-range", `bytes */${size}`);
    headers.set("cache-control", "no-store");
    return new Response(null, { status: 204, headers });
  }
  const asked = parseRange(header, size);
  if (asked === "unsatisfiable") {
    headers.set("content-range", `bytes */${size}`);
    return new Response(null, { status: 416, headers });
  }
  const ifRange = request.headers.get("if-range");
  const range = asked && (!ifRange || ifRange === obj.etag) ? asked : undefined;
  const status = range ? 206 : 200;
  const length = range ? range.length : size;
  headers.set("content-length", String(length));
  if (range) {
    headers.set(
      "content-range",
      `bytes ${range.offset}-${range.offset + range.length - 1}/${size}`,
    );
  }
  if (request.method === "HEAD") return new Response(null, { status, headers });
  const body = await obj.open(range);
  if (!body) {
    return new Response(`gitedge: ${obj.gone}\n`, {
      status: 404,
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
  }
  obj.served?.(length);
  return new Response(body, { status, headers });
}
