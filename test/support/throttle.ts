/** Bandwidth caps for test servers: a token bucket and a stream that respects it. */
import { piecewise } from "./streams.ts";

/** Where caps and stalls get the time: the real one, or a virtual one in tests. */
export interface Clock {
  /** Milliseconds, monotonic. */
  now(): number;
  /** Resolves after `ms`; rejects with the signal's reason if aborted first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** `performance.now()` and real timers. */
export const realClock: Clock = { now: () => performance.now(), sleep: (ms, s) => sleep(ms, s) };

/** The largest burst a throttled stream may send at once. */
export const MAX_BURST = 16 * 1024;

/**
 * A token bucket of `rate` bytes per second that fills up to `burst` bytes while its user is idle.
 * Time spent waiting on its own timer counts in full, even past the burst: a timer that fires late
 * (a busy machine) is the bucket's fault, not the client's, so the credit is kept and spent in
 * back-to-back pieces of at most `burst` bytes. Idle time beyond the burst is lost, as in any
 * token bucket, so a slow reader cannot save up for a later burst.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(readonly rate: number, readonly burst: number, readonly clock: Clock = realClock) {
    if (!(rate > 0) || !(burst >= 1)) {
      throw new RangeError(`token bucket needs rate > 0 and burst >= 1 (got ${rate}, ${burst})`);
    }
    this.tokens = burst;
    this.last = clock.now();
  }

  /**
   * Waits until `min(max, atLeast)` bytes may be sent, then spends and returns as many as are
   * available, up to `max` and the burst.
   */
  async takeUpTo(max: number, atLeast: number, signal?: AbortSignal): Promise<number> {
    const want = Math.min(max, atLeast, this.burst);
    this.accrue(false);
    while (this.tokens < want) {
      await this.clock.sleep(((want - this.tokens) / this.rate) * 1000, signal);
      this.accrue(true);
    }
    const n = Math.min(max, this.burst, Math.floor(this.tokens));
    this.tokens -= n;
    return n;
  }

  /** Adds tokens for the time since the last call; only timer waits may go past the burst. */
  private accrue(waited: boolean): void {
    const now = this.clock.now();
    const gained = ((now - this.last) / 1000) * this.rate;
    this.last = now;
    this.tokens = waited
      ? this.tokens + gained
      : Math.max(this.tokens, Math.min(this.burst, this.tokens + gained));
  }
}

/**
 * The burst used for a cap: 20 ms worth of bytes, between 1 KiB and {@link MAX_BURST}. Above
 * 8 MB/s it is 2 ms worth instead: timers cannot wake more often than about once a millisecond, so
 * a 16 KiB burst could not sustain such rates.
 */
export function burstFor(bytesPerSecond: number): number {
  if (bytesPerSecond > 8_000_000) return Math.floor(bytesPerSecond / 500);
  return Math.max(1024, Math.min(MAX_BURST, Math.floor(bytesPerSecond / 50)));
}

/**
 * Re-chunks `source` into pieces the bucket allows (at least a quarter of its burst, more when a
 * timer fired late) and releases each only when allowed; pull-based, so nothing is read ahead.
 */
export function throttle(
  source: ReadableStream<Uint8Array>,
  bucket: TokenBucket,
): ReadableStream<Uint8Array> {
  // Waiting for only a quarter of the burst leaves room for timer lateness: tokens that accrue
  // while a timer fires late are sent (up to the burst) instead of lost, so the rate holds.
  const pieceSize = Math.max(1, Math.floor(bucket.burst / 4));
  return piecewise(source, async (rest, { controller, signal }) => {
    const n = await bucket.takeUpTo(rest.byteLength, pieceSize, signal);
    controller.enqueue(rest.subarray(0, n));
    return n;
  });
}

/** Resolves after `ms`; rejects with the signal's reason if aborted first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Virtual time for tests of the harness itself: every sleep advances it at once and is recorded,
 * so caps and stalls are checked by counting, not by a wall clock. Sleeps of `hangMs` or more
 * never end on their own (only an abort ends them); `hung` resolves when the first one starts.
 */
export class VirtualClock implements Clock {
  #now = 0;
  readonly #hung = Promise.withResolvers<void>();
  /** Every sleep asked for, in order (ms). */
  readonly sleeps: number[] = [];

  constructor(readonly hangMs = Infinity) {}

  /** Resolves when a sleep of at least `hangMs` has started. */
  get hung(): Promise<void> {
    return this.#hung.promise;
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    this.sleeps.push(ms);
    if (ms < this.hangMs) {
      // At least a microsecond, as a real timer would: a shortfall of a rounding error must
      // still move time on.
      this.#now += Math.max(ms, 0.001);
      return Promise.resolve();
    }
    this.#hung.resolve();
    return new Promise((_, reject) => {
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
  }
}
