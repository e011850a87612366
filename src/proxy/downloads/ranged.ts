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
