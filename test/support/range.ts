/** HTTP `Range: bytes=…` requests (RFC 9110 §14), single ranges only. */

/** What a Range header asks of a representation of `size` bytes. */
export type RangeRequest =
  /** No usable Range header (absent, malformed or multi-range): send the whole body. */
  | { kind: "whole" }
  /** Bytes `start` to `end` inclusive. */
  | { kind: "range"; start: number; end: number }
  /** A valid range that lies outside the representation: 416. */
  | { kind: "unsatisfiable" };

/** Interprets `header` (e.g. `bytes=0-99`, `bytes=100-`, `bytes=-100`) against `size`. */
export function parseRange(header: string | null, size: number): RangeRequest {
  const m = header === null ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return { kind: "whole" };
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return { kind: "unsatisfiable" };
    return { kind: "range", start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (m[2] !== "" && Number(m[2]) < start) return { kind: "whole" }; // invalid: ignore it
  if (start >= size) return { kind: "unsatisfiable" };
  return { kind: "range", start, end };
}
