/**
 * The CLI's live progress line for a terminal: packs done, bytes and rate in total, and the
 * packs in flight with their percentage. Redraws at most every `intervalMs`.
 */
import type { ProgressEvent } from "./progress.ts";
import type { ObjectCounts } from "./index_progress.ts";

interface PackState {
  bytes: number;
  total?: number;
  done: boolean;
}

/** Renders clone progress to a terminal stream (stderr by default). */
export class ProgressView {
  readonly #packs = new Map<string, PackState>();
  readonly #write: (text: string) => void;
  readonly #intervalMs: number;
  readonly #width: () => number;
  readonly #objects = new Map<string, ObjectCounts>();
  readonly #now: () => number;
  #phase = "";
  #inlineBytes = 0;
  /**
   * From the start to the latest byte: the rate is over that span, so it holds still while packs
   * are indexed and checked out instead of decaying.
   */
  readonly #started: number;
  #lastByteAt: number;
  #bytesSeen = 0;
  #lastDraw = 0;
  #drawn = false;

  constructor(
    options: {
      write?: (text: string) => void;
      intervalMs?: number;
      width?: () => number;
      /** The clock, in milliseconds (tests pass their own). */
      now?: () => number;
    } = {},
  ) {
    const encoder = new TextEncoder();
    this.#write = options.write ?? ((text) => Deno.stderr.writeSync(encoder.encode(text)));
    this.#intervalMs = options.intervalMs ?? 100;
    this.#width = options.width ?? terminalWidth;
    this.#now = options.now ?? (() => performance.now());
    this.#started = this.#lastByteAt = this.#now();
  }

  /** Takes one index-pack's object counts (`key`: "inline" or a pack's hash). */
  objects(key: string, counts: ObjectCounts): void {
    this.#objects.set(key, counts);
    this.#draw(false);
  }

  /** Shows a phase name ("Receiving inline pack", "Checking connectivity", ...). */
  phase(name: string): void {
    this.#phase = name;
    this.#draw(true);
  }

  /** Shows the server's latest progress message in place of the phase. */
  remote(message: string): void {
    const line = message.split(/[\r\n]/).filter(Boolean).at(-1);
    if (line) this.#phase = `remote: ${line.trim()}`;
    this.#draw(false);
  }

  /** Counts bytes of the inline pack received so far. */
  inline(bytes: number): void {
    this.#inlineBytes = bytes;
    this.#draw(false);
  }

  /** Feeds a packfile-URI progress event. */
  packEvent(event: ProgressEvent): void {
    this.#packs.set(event.hash, {
      bytes: event.bytes,
      total: event.total,
      done: event.type === "done",
    });
    this.#draw(event.type !== "progress");
  }

  /** Ends the line so later output starts on a fresh one. */
  finish(): void {
    if (this.#drawn) {
      this.#draw(true);
      this.#write("\n");
      this.#drawn = false;
    }
  }

  #draw(force: boolean): void {
    const now = this.#now();
    if (!force && now - this.#lastDraw < this.#intervalMs) return;
    this.#lastDraw = now;
    const line = this.#line(now).slice(0, Math.max(20, this.#width() - 1));
    this.#write(`\r\x1b[K${line}`);
    this.#drawn = true;
  }

  #line(now: number): string {
    const packs = [...this.#packs.entries()];
    const uriBytes = packs.reduce((sum, [, p]) => sum + p.bytes, 0);
    const total = this.#inlineBytes + uriBytes;
    if (total > this.#bytesSeen) {
      this.#lastByteAt = now;
      this.#bytesSeen = total;
    }
    const span = (this.#lastByteAt - this.#started) / 1000;
    const rate = span > 0.05 ? `, ${formatBytes(total / span)}/s` : "";
    const parts = [this.#phase, `${formatBytes(total)}${rate}`];
    const counts = [...this.#objects.values()];
    if (counts.length > 0) {
      const sum = (f: (c: ObjectCounts) => number) => counts.reduce((n, c) => n + f(c), 0);
      const deltasTotal = sum((c) => c.deltasTotal);
      parts.push(
        `objects ${sum((c) => c.objects)}/${sum((c) => c.objectsTotal)}` +
          (deltasTotal > 0 ? `, deltas ${sum((c) => c.deltas)}/${deltasTotal}` : ""),
      );
    }
    if (packs.length > 0) {
      const done = packs.filter(([, p]) => p.done).length;
      parts.push(`packs ${done}/${packs.length}`);
      const active = packs.filter(([, p]) => !p.done).map(([hash, p]) =>
        `${hash.slice(0, 7)} ${
          p.total ? `${Math.floor((100 * p.bytes) / p.total)}%` : formatBytes(p.bytes)
        }`
      );
      if (active.length > 0) parts.push(active.join(" "));
    }
    return parts.filter(Boolean).join(" | ");
  }
}

/** Formats a byte count with a binary unit (e.g. `1.5 MiB`). */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${Math.round(value)} B` : `${value.toFixed(1)} ${units[unit]}`;
}

function terminalWidth(): number {
  try {
    const { columns } = Deno.consoleSize();
    return columns >= 40 ? columns : 80; // pseudo-terminals may report 0
  } catch {
    return 80; // not a console (or size unavailable): a conservative default
  }
}
