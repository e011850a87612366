/**
 * Small assertion helpers for the wire-format tests, built on node:assert,
 * that hand back the caught error so tests can inspect its `code`.
 *
 * @module
 */

import nodeAssert from "node:assert/strict";

/** Asserts `condition` is truthy. */
export function assert(condition: unknown, message?: string): asserts condition {
  nodeAssert.ok(condition, message);
}

/** Deep strict equality (typed arrays compare element-wise). */
export function assertEquals<T>(actual: T, expected: T, message?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, message);
}

// deno-lint-ignore no-explicit-any
type ErrorClass<E extends Error> = new (...args: any[]) => E;

function checkError<E extends Error>(
  err: unknown,
  cls: ErrorClass<E>,
  includes: string | undefined,
): E {
  if (!(err instanceof cls)) {
    throw new nodeAssert.AssertionError({
      message: `expected ${cls.name}, got ${
        err instanceof Error ? `${err.name}: ${err.message}` : String(err)
      }`,
    });
  }
  if (includes !== undefined && !err.message.includes(includes)) {
    throw new nodeAssert.AssertionError({
      message: `expected message containing "${includes}", got "${err.message}"`,
    });
  }
  return err;
}

/** Asserts `fn` throws an instance of `cls` (message containing `includes`) and returns it. */
export function assertThrows<E extends Error>(
  fn: () => unknown,
  cls: ErrorClass<E>,
  includes?: string,
): E {
  try {
    fn();
  } catch (err) {
    return checkError(err, cls, includes);
  }
  throw new nodeAssert.AssertionError({ message: `expected ${cls.name} to be thrown` });
}

/** Asserts `fn` rejects with an instance of `cls` (message containing `includes`) and returns it. */
export async function assertRejects<E extends Error>(
  fn: () => Promise<unknown>,
  cls: ErrorClass<E>,
  includes?: string,
): Promise<E> {
  try {
    await fn();
  } catch (err) {
    return checkError(err, cls, includes);
  }
  throw new nodeAssert.AssertionError({ message: `expected ${cls.name} to be thrown` });
}
