/**
 * The settings table ({@link SETTINGS}) as people read it: the options part of
 * `gitedge serve --help`, and the settings table of docs/settings.md (`deno task settings` writes
 * it between {@link DOC_BEGIN} and {@link DOC_END}; a test fails when docs/settings.md differs).
 */
import { appliesTo, formatBytes, type Setting, SETTINGS } from "./table.ts";

/** `code` spans as plain text, for a terminal: quoted where they hold a space or a word. */
function plain(text: string): string {
  return text.replace(/`([^`]*)`/g, (_, code) => /\s|^[a-z]+$/.test(code) ? `'${code}'` : code);
}

/** Kept on one line by {@link wrap}. */
const NO_BREAK = "\u00a0";

/** The default as documented, or undefined when the setting is unset by default. */
function defaultOf(s: Setting, bytesAsNumber: boolean): string | undefined {
  if (s.defaultText !== undefined) return s.defaultText;
  if (s.default === undefined) return undefined;
  if (s.bytes && typeof s.default === "number") {
    const human = formatBytes(s.default);
    return bytesAsNumber && human !== String(s.default) ? `${s.default} (${human})` : human;
  }
  return String(s.default);
}

/** `text` after `first`, wrapped to `width` columns; later lines are indented by `indent`. */
function wrap(text: string, first: string, indent: number, width = 100): string[] {
  const lines: string[] = [];
  let line = first;
  let empty = true;
  for (const word of text.split(/[ \t\n]+/).filter((w) => w !== "")) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line);
      line = " ".repeat(indent) + word;
    } else {
      line += (empty ? "" : " ") + word;
    }
    empty = false;
  }
  lines.push(line);
  return lines.map((l) => l.replaceAll(NO_BREAK, " "));
}

/** One option or variable of `--help`: its name column, then its help wrapped at column 24. */
function helpEntry(name: string, text: string): string[] {
  const column = 24;
  const head = `  ${name}`;
  if (head.length < column - 1) return wrap(text, head.padEnd(column), column);
  return [head, ...wrap(text, " ".repeat(column), column)];
}

/** The `options:` and `environment:` parts of `gitedge serve --help`. */
export function serveOptionsHelp(): string {
  const options: string[] = [];
  const environment: string[] = [];
  for (const s of SETTINGS) {
    if (!appliesTo(s, "serve")) continue;
    const fallback = defaultOf(s, true);
    const text = plain(s.help) + (s.list ? " Repeat for each." : "") +
      (fallback === undefined
        ? ""
        : ` ${`Default: ${plain(fallback)}.`.replaceAll(" ", NO_BREAK)}`);
    if (s.flag) options.push(...helpEntry(`${s.flag}${s.arg ? ` ${s.arg}` : ""}`, text));
    if (s.env) {
      const as = `As ${s.flag}${s.list ? ", comma-separated" : ""} (the flag wins).`;
      environment.push(...helpEntry(s.env, s.flag ? as : text));
    }
  }
  options.push(...helpEntry("-h, --help", "Show this help."));
  return [
    "options:",
    ...options,
    ...(environment.length ? ["", "environment:", ...environment] : []),
  ].join("\n");
}

/** The settings table of docs/settings.md (markdown, columns padded as `deno fmt` pads them). */
export function settingsMarkdown(): string {
  const rows: string[][] = [["`gitedge serve`", "Worker var", "Default", "Minimum", "Meaning"]];
  for (const s of SETTINGS) {
    const serve = [
      s.flag ? `\`${s.flag}${s.arg ? ` ${s.arg}` : ""}\`${s.list ? " (repeat)" : ""}` : "",
      s.env ? `\`${s.env}\`` : "",
    ].filter((cell) => cell !== "").join(", ");
    const worker = s.workerVar
      ? `\`${s.workerVar}\`${s.list ? " (comma-separated)" : ""}${s.secret ? " (secret)" : ""}`
      : "";
    rows.push([serve, worker, defaultOf(s, false) ?? "", s.min?.toString() ?? "", s.help]);
  }
  const widths = rows[0].map((_, i) => Math.max(3, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  return [line(rows[0]), line(widths.map((w) => "-".repeat(w))), ...rows.slice(1).map(line)]
    .join("\n");
}

export const DOC_BEGIN =
  "<!-- settings table: generated from src/proxy/settings/table.ts by `deno task settings` -->";
export const DOC_END = "<!-- end of settings table -->";

/** `doc` with the text between the markers replaced by {@link settingsMarkdown}. */
export function withSettingsTable(doc: string): string {
  const begin = doc.indexOf(DOC_BEGIN);
  const end = doc.indexOf(DOC_END);
  if (begin < 0 || end < begin) {
    throw new Error(`docs/settings.md lacks the markers ${DOC_BEGIN} ... ${DOC_END}`);
  }
  return `${doc.slice(0, begin + DOC_BEGIN.length)}\n\n${settingsMarkdown()}\n\n${doc.slice(end)}`;
}
