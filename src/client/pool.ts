/**
 * A promise pool: runs tasks with at most N in flight. Workers pull the next task when one
 * finishes (no polling). The first failure aborts the signal handed to every task, waits for the
 * ones in flight to settle (so nothing keeps running behind the caller's back), then rejects with
 * that first error.
 */

/**
 * One unit of work; it should stop promptly when `signal` aborts.
 *
 * @example A task that stops when the pool aborts
 * ```ts
 * const task: PoolTask<Response> = (signal) => fetch("https://example.com/", { signal });
 * ```
 */
export type PoolTask<T> = (signal: AbortSignal) => Promise<T>;

/**
 * Options for {@link runPool}.
 *
 * @example At most four in flight, until the caller gives up
 * ```ts
 * const controller = new AbortController();
 * const options: PoolOptions = { concurrency: 4, signal: controller.signal };
 * ```
 */
export interface PoolOptions {
  /** Maximum number of tasks in flight (at least 1). */
  concurrency: number;
  /** Aborting it stops starting tasks and aborts those in flight. */
  signal?: AbortSignal;
}

/**
 * Runs every task with at most `concurrency` in flight and resolves with their results in task
 * order. Rejects with the first task error (or the caller's abort reason).
 *
 * @example Three tasks, two at a time
 * ```ts
 * const tasks: PoolTask<number>[] = [1, 2, 3].map((n) => async (signal) => {
 *   await new Promise((resolve) => setTimeout(resolve, 10 * n));
 *   signal.throwIfAborted();
 *   return n * n;
 * });
 * const squares = await runPool(tasks, { concurrency: 2 }); // [1, 4, 9]
 * ```
 */
export async function runPool<T>(
  tasks: readonly PoolTask<T>[],
  options: PoolOptions,
): Promise<T[]> {
  const concurrency = Math.max(1, Math.floor(options.concurrency));
  const controller = new AbortController();
  const outer = options.signal;
  const onOuterAbort = () => controller.abort(outer?.reason);
  if (outer?.aborted) onOuterAbort();
  outer?.addEventListener("abort", onOuterAbort, { once: true });

  const results = new Array<T>(tasks.length);
  let next = 0;
  let failed = false;
  let firstError: unknown;

  const worker = async (): Promise<void> => {
    while (!controller.signal.aborted && next < tasks.length) {
      const index = next++;
      try {
        results[index] = await tasks[index](controller.signal);
      } catch (error) {
        if (!failed) {
          failed = true;
          firstError = error;
          controller.abort(error);
        }
        return;
      }
    }
  };

  try {
    const workers = Array.from({ length: Math.min(concurrency, tasks.length) }, worker);
    await Promise.all(workers);
  } finally {
    outer?.removeEventListener("abort", onOuterAbort);
  }
  if (failed) throw firstError;
  if (controller.signal.aborted) throw controller.signal.reason;
  return results;
}

/**
 * Awaits every promise, then throws the first rejection (in argument order) if any: unlike
 * `Promise.all`, nothing is still running when the caller sees the failure.
 */
export async function settleAll<T extends readonly unknown[]>(
  promises: { readonly [K in keyof T]: Promise<T[K]> },
): Promise<T> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((r) => r.status === "rejected");
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}
