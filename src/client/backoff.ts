/** Waiting between retries. */

/**
 * The delay before retry number `attempt` (1-based): exponential in the attempt, capped at
 * `maxMs`, with "equal jitter" (half fixed, half random) so parallel downloads that failed
 * together do not retry in lockstep.
 */
export function backoffDelay(
  attempt: number,
  baseMs: number,
  maxMs = 10_000,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return ceiling / 2 + random() * (ceiling / 2);
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
