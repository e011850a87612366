/**
 * A bound on the bytes of client requests being parsed at once. A parsed request is held in
 * memory as text lines (several times its size on the wire), so the edge admits at most a budget
 * of them together: a request that would go over it is refused (503) instead of queued.
 */
export class ParseBudget {
  #used = 0;

  /** @param limit bytes that parsed requests may hold together */
  constructor(readonly limit: number) {}

  /**
   * The budget for a request cap: one request at the cap and another half its size at once (a
   * clone at the cap is rare; two at once rarer still, and each costs several times its size).
   */
  static forCap(maxRequestBytes: number): ParseBudget {
    return new ParseBudget(Math.floor(maxRequestBytes * 1.5));
  }

  /** Bytes in use now. */
  get used(): number {
    return this.#used;
  }

  /** Takes `n` bytes; false (taking nothing) when that would exceed the limit. */
  take(n: number): boolean {
    if (this.#used + n > this.limit) return false;
    this.#used += n;
    return true;
  }

  give(n: number): void {
    this.#used = Math.max(0, this.#used - n);
  }
}
