/**
 * How every bench prints its result: a title, one markdown table (the figures of each competitor,
 * medians where there are runs) and the ratios between them, one line each. The table pastes into
 * bench/RESULTS.md as it is.
 */

/** A table cell; numbers are printed as given (format them first), null and undefined as "–". */
export type Cell = string | number | null | undefined;

const NUMERIC = /^[-+]?[\d.,]+\s*(x|×|%|s|ms|MB|MiB|KB|B)?$/;

function text(cell: Cell): string {
  return cell === null || cell === undefined || cell === "" ? "–" : String(cell);
}

/** A markdown table: columns padded to their widest cell, numeric columns right-aligned. */
export function markdownTable(headers: string[], rows: Cell[][]): string {
  const cells = rows.map((r) => headers.map((_, i) => text(r[i])));
  const widths = headers.map((h, i) => Math.max(3, h.length, ...cells.map((r) => r[i].length)));
  const right = headers.map((_, i) =>
    cells.length > 0 && cells.every((r) => r[i] === "–" || NUMERIC.test(r[i]))
  );
  const line = (r: string[]) =>
    `| ${r.map((c, i) => right[i] ? c.padStart(widths[i]) : c.padEnd(widths[i])).join(" | ")} |`;
  const rule = `| ${
    widths.map((w, i) => right[i] ? `${"-".repeat(w - 1)}:` : "-".repeat(w)).join(" | ")
  } |`;
  return [line(headers), rule, ...cells.map(line)].join("\n");
}

/** `a / b` as "1.23x" ("–" when either is missing or b is 0). */
export function ratio(a: number | undefined, b: number | undefined, digits = 2): string {
  if (a === undefined || b === undefined || !Number.isFinite(a / b) || b === 0) return "–";
  return `${(a / b).toFixed(digits)}x`;
}

/** One bench result. */
export interface BenchTable {
  /** What was measured: repository, runs, medians, load. */
  title: string;
  headers: string[];
  rows: Cell[][];
  /** The ratios (and any caveat), one line each, printed under the table. */
  ratios?: string[];
}

/** The printed form of a result: the title, the table, the ratios. */
export function formatResult(result: BenchTable): string {
  const lines = [`\n### ${result.title}\n`, markdownTable(result.headers, result.rows)];
  if (result.ratios?.length) lines.push("", ...result.ratios.map((r) => `- ${r}`));
  return lines.join("\n");
}

/** Prints a result to stdout. */
export function printResult(result: BenchTable): void {
  console.log(formatResult(result));
}
