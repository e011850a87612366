/** Minimal assertions for the client tests (no @std available). */

/** An assertion that did not hold. */
export class AssertionError extends Error {
  override name = "AssertionError";
}

/** Throws unless `condition` is truthy. */
export function assert(condition: unknown, message = "expected a truthy value"): asserts condition {
  if (!condition) throw new AssertionError(message);
}

/** Throws unless `actual` and `expected` are structurally equal (JSON-comparable values). */
export function assertEquals<T>(actual: T, expected: T, message = ""): void {
  if (actual === expected) return;
  const a = JSON.stringify(actual);
  const b = JSON.stringify(expected);
  if (a !== b || typeof actual !== typeof expected) {
    throw new AssertionError(`${message ? `${message}: ` : ""}expected ${b}, got ${a}`);
  }
}

/** Awaits `fn()` and returns what it rejected with, checking its class when one is given. */
export async function assertRejects<E extends Error = Error>(
  fn: () => Promise<unknown>,
  // deno-lint-ignore no-explicit-any
  errorClass?: new (...args: any[]) => E,
): Promise<E> {
  try {
    await fn();
  } catch (error) {
    if (errorClass && !(error instanceof errorClass)) {
      throw new AssertionError(
        `expected ${errorClass.name}, got ${error instanceof Error ? error.stack : String(error)}`,
      );
    }
    return error as E;
  }
  throw new AssertionError("expected a rejection");
}

/** Calls `fn()` and returns what it threw, checking its class when one is given. */
export function assertThrows<E extends Error = Error>(
  fn: () => unknown,
  // deno-lint-ignore no-explicit-any
  errorClass?: new (...args: any[]) => E,
): E {
  try {
    fn();
  } catch (error) {
    if (errorClass && !(error instanceof errorClass)) {
      throw new AssertionError(
        `expected ${errorClass.name}, got ${error instanceof Error ? error.stack : String(error)}`,
      );
    }
    return error as E;
  }
  throw new AssertionError("expected an exception");
}
