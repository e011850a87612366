/**
 * The CLI's live progress line for a terminal: packs done, bytes and rate in total, and the
 * packs in flight with their percentage. Redraws at most every `intervalMs`.
 */
import type { ProgressEvent } from "./progress.ts";

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
  #phase = "";
  #inlineBytes = 0;
  #started = performance.now();
  #lastDraw = 0;
  #drawn = false;

  constructor(
    options: { write?: (text: string) => void; intervalMs?: number; width?: () => number } = {},
  ) {
    const encoder = new TextEncoder();
    this.#write = options.write ?? ((text) => Deno.stderr.writeSync(encoder.encode(text)));
    this.#intervalMs = options.intervalMs ?? 100;
    this.#width = options.width ?? terminalWidth;
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
    if (event.type === "start") this.#started = Math.min(this.#started, performance.now());
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
    const now = performance.now();
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
    const seconds = Math.max(0.001, (now - this.#started) / 1000);
    const parts = [this.#phase, `${formatBytes(total)}, ${formatBytes(total / seconds)}/s`];
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
