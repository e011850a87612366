/** Deciding whether an HTTP response continues a partial download or starts it over. */
import { HttpStatusError, RangeMismatchError } from "./errors.ts";

/** How to use a response's body given the bytes already received. */
export interface BodyPlan {
  /** "resume": the body continues at the bytes already received; "restart": it starts at 0. */
  mode: "resume" | "restart";
  /** The full size of the resource when known. */
  total: number | undefined;
}

/** A parsed `Content-Range: bytes <start>-<end>/<total|*>` header. */
export interface ContentRange {
  start: number;
  end: number;
  total: number | undefined;
}

/** Parses a byte `Content-Range` header; returns null if it is absent or malformed. */
export function parseContentRange(value: string | null): ContentRange | null {
  if (value === null) return null;
  const match = /^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i.exec(value.trim());
  if (!match) return null;
  const start = Number(match[1]);
  const end = Number(match[2]);
  if (end < start) return null;
  return { start, end, total: match[3] === "*" ? undefined : Number(match[3]) };
}

/**
 * Classifies `response` for a request made after `received` bytes (with `Range: bytes=<received>-`
 * when `received > 0`). A 200 restarts the download; a 206 must start exactly at `received`.
 * Throws {@link HttpStatusError} for unusable statuses and {@link RangeMismatchError} when the
 * server answered the range with something that cannot continue (416, wrong start, bad header).
 */
export function planResponse(url: string, response: Response, received: number): BodyPlan {
  if (response.status === 200) {
    return { mode: "restart", total: contentLength(response) };
  }
  if (response.status === 206) {
    const range = parseContentRange(response.headers.get("content-range"));
    if (range === null) {
      throw new RangeMismatchError(url, received, "206 without a valid Content-Range");
    }
    if (range.start !== received) {
      throw new RangeMismatchError(url, received, `206 starts at byte ${range.start}`);
    }
    return { mode: received === 0 ? "restart" : "resume", total: range.total };
  }
  if (response.status === 416 && received > 0) {
    throw new RangeMismatchError(url, received, "416 Range Not Satisfiable");
  }
  throw new HttpStatusError(url, response.status, response.statusText);
}

function contentLength(response: Response): number | undefined {
  const value = response.headers.get("content-length");
  if (value === null || !/^\d+$/.test(value.trim())) return undefined;
  return Number(value);
}
