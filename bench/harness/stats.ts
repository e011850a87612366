/** Shared by the benches: the median, runs of competitors interleaved round by round, timing. */

/** The median; for an even count, the mean of the two middle values. */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError("median of no values");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Runs every competitor once per round, `rounds` times, rotating the order each round so none
 * always goes first (on a cold cache) or last; returns each competitor's results in round order.
 */
export async function interleaved<T>(
  rounds: number,
  competitors: (() => Promise<T>)[],
): Promise<T[][]> {
  const results = competitors.map((): T[] => []);
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < competitors.length; k++) {
      const i = (round + k) % competitors.length;
      results[i].push(await competitors[i]());
    }
  }
  return results;
}

/** Seconds `fn` took. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return (performance.now() - started) / 1000;
}

/**
 * Writes back every dirty page (`sync`) before a competitor runs, so none pays for the write-back
 * of the one before it (a clone leaves its pack and checkout as dirty pages: hundreds of MB that
 * the kernel flushes while the next one runs).
 */
export async function settleDisk(): Promise<void> {
  await new Deno.Command("sync").output();
}
