/**
 * The edge's structured log: one record per event (a request, a build's start, steps and end, an
 * origin error, the settings at start), each a flat object of fields. Runtimes inject a
 * {@link Logger} (`EdgeDeps.log`); `src/proxy` never writes to a console of its own.
 *
 * Records are JSON lines (`{"time":...,"level":"info","event":"request",...}`) for collectors,
 * or a readable line for a terminal (`text`). Secrets never reach a line: fields named like one
 * (`authorization`, `token`, `key`, `secret`, `password`, `cookie`) are dropped to `***`, and the
 * `user:password@` of every URL in a string is masked.
 */
import { redactCredentials } from "../../redact.ts";

export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
export type LogLevel = typeof LOG_LEVELS[number];

export const LOG_FORMATS = ["json", "text"] as const;
export type LogFormat = typeof LOG_FORMATS[number];

/** A record's fields (besides `time`, `level` and `event`, which the logger sets). */
export type LogFields = Record<string, unknown>;

/** Where parts of the edge write their records. */
export interface Logger {
  /** Whether records of `level` are written at all (skip building costly fields otherwise). */
  enabled(level: LogLevel): boolean;
  log(level: LogLevel, event: string, fields?: LogFields): void;
}

/** A logger that writes nothing. */
export const SILENT_LOGGER: Logger = { enabled: () => false, log: () => {} };

/** Field names whose values are never written. */
const SECRET_NAME = /authorization|token|secret|password|passwd|cookie|(^|[a-z_])key$/i;

/** `value` as it may be written: strings with URL credentials masked, errors as their message. */
function clean(name: string, value: unknown, depth = 0): unknown {
  if (SECRET_NAME.test(name) && value !== undefined && value !== null) return "***";
  if (typeof value === "string") return redactCredentials(value);
  if (value instanceof Error) return redactCredentials(`${value.name}: ${value.message}`);
  if (value instanceof Uint8Array) return `<${value.byteLength} bytes>`;
  if (Array.isArray(value)) return value.map((v) => clean("", v, depth + 1));
  if (value !== null && typeof value === "object" && depth < 3) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = clean(k, v, depth + 1);
    return out;
  }
  return value;
}

/** One record as a JSON line (without the newline). */
export function jsonLine(time: number, level: LogLevel, event: string, fields: LogFields): string {
  const record: Record<string, unknown> = { time: new Date(time).toISOString(), level, event };
  for (const [k, v] of Object.entries(fields)) {
    if (v !== undefined && !(k in record)) record[k] = clean(k, v);
  }
  return JSON.stringify(record);
}

/** One record as a readable line: `time LEVEL event key=value ...` (strings with spaces quoted). */
export function textLine(time: number, level: LogLevel, event: string, fields: LogFields): string {
  const parts = [new Date(time).toISOString(), level.toUpperCase().padEnd(5), event];
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    const c = clean(k, v);
    const s = typeof c === "string" ? c : JSON.stringify(c);
    parts.push(`${k}=${typeof c === "string" && /[\s"=]/.test(s) ? JSON.stringify(s) : s}`);
  }
  return parts.join(" ");
}

export interface LoggerOptions {
  /** Records below this are dropped (default `info`). */
  level?: LogLevel;
  /** Default `json`. */
  format?: LogFormat;
  /** Writes one line (no newline at its end); `level` lets a runtime pick stdout or stderr. */
  write: (line: string, level: LogLevel) => void;
  now?: () => number;
}

/** A logger writing each record as one line through `opts.write`. */
export function createLogger(opts: LoggerOptions): Logger {
  const min = LOG_LEVELS.indexOf(opts.level ?? "info");
  const format = opts.format === "text" ? textLine : jsonLine;
  const now = opts.now ?? Date.now;
  const enabled = (level: LogLevel) => LOG_LEVELS.indexOf(level) >= min;
  return {
    enabled,
    log(level, event, fields = {}) {
      if (!enabled(level)) return;
      try {
        opts.write(format(now(), level, event, fields), level);
      } catch { /* a log that cannot be written never fails the work it describes */ }
    },
  };
}
