/**
 * A liveness deadline: a test that would otherwise hang (a fuzz loop, a stop that waits forever)
 * fails with a clear message instead. It bounds "never" only; speed is measured in bench/.
 */

/** The deadline tests use unless they say otherwise: generous, for a loaded 2-core machine. */
export const HANG_MS = 60_000;

/** A liveness deadline passed. */
export class DeadlineError extends Error {
  override name = "DeadlineError";
}

/** `promise`'s outcome, or a {@link DeadlineError} if it has none within `ms`. */
export async function withinDeadline<T>(
  promise: Promise<T>,
  what: string,
  ms: number = HANG_MS,
): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(`${what}: no outcome after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
