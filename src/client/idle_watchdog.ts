/** Detecting stalled HTTP transfers. */
import { StallError } from "./errors.ts";

/**
 * An abort signal that fires when nothing happens for `timeoutMs` (call {@link touch} whenever
 * bytes arrive) or when the parent signal aborts. After a stall, {@link stalled} is true and the
 * signal's reason is a {@link StallError}.
 */
export class IdleWatchdog implements Disposable {
  readonly #controller = new AbortController();
  readonly #parent?: AbortSignal;
  readonly #onParentAbort = () => this.#controller.abort(this.#parent?.reason);
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stalled = false;

  constructor(readonly url: string, readonly timeoutMs: number, parent?: AbortSignal) {
    this.#parent = parent;
    if (parent?.aborted) this.#onParentAbort();
    parent?.addEventListener("abort", this.#onParentAbort, { once: true });
    this.touch();
  }

  /** Aborts on stall or parent abort; pass it to `fetch`. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** True once the timeout fired. */
  get stalled(): boolean {
    return this.#stalled;
  }

  /** Restarts the idle timer. */
  touch(): void {
    clearTimeout(this.#timer);
    if (this.#controller.signal.aborted) return;
    this.#timer = setTimeout(() => {
      this.#stalled = true;
      this.#controller.abort(new StallError(this.url, this.timeoutMs));
    }, this.timeoutMs);
  }

  /** Stops the timer and detaches from the parent signal. */
  [Symbol.dispose](): void {
    clearTimeout(this.#timer);
    this.#parent?.removeEventListener("abort", this.#onParentAbort);
  }
}
