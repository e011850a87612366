/**
 * The assertions every test uses (no `@std/assert` here: JSR is not reachable). Deep equality is
 * `node:assert`'s strict one: typed arrays compare element by element, prototypes and `-0` count.
 * Failures throw `node:assert`'s `AssertionError`, which carries a diff of the two values.
 *
 * @module
 */
import nodeAssert from "node:assert/strict";

export { AssertionError } from "node:assert/strict";

/** Throws unless `condition` is truthy. */
export function assert(condition: unknown, message?: string): asserts condition {
  nodeAssert.ok(condition, message);
}

/** Throws unless `actual` and `expected` are deeply and strictly equal. */
export function assertEquals<T>(actual: T, expected: T, message?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, message);
}

/** Throws unless `expected` matches `actual`. */
export function assertMatch(actual: string, expected: RegExp, message?: string): void {
  nodeAssert.match(actual, expected, message);
}

// deno-lint-ignore no-explicit-any
type ErrorClass<E extends Error> = new (...args: any[]) => E;

/** Checks a caught value: an instance of `errorClass` whose message matches `messageMatch`. */
function expectError<E extends Error>(
  caught: unknown,
  errorClass: ErrorClass<E> | undefined,
  messageMatch: string | RegExp | undefined,
): E {
  const cls: ErrorClass<Error> = errorClass ?? Error;
  if (!(caught instanceof cls)) {
    const got = caught instanceof Error ? caught.stack ?? String(caught) : String(caught);
    throw new nodeAssert.AssertionError({ message: `expected ${cls.name}, got ${got}` });
  }
  if (typeof messageMatch === "string" && !caught.message.includes(messageMatch)) {
    throw new nodeAssert.AssertionError({
      message: `expected a message containing "${messageMatch}", got "${caught.message}"`,
    });
  }
  if (messageMatch instanceof RegExp) assertMatch(caught.message, messageMatch);
  return caught as E;
}

/**
 * Calls `fn` and returns what it threw: an instance of `errorClass` (any `Error` when omitted)
 * whose message contains `messageMatch` (a string) or matches it (a RegExp), when given.
 */
export function assertThrows<E extends Error = Error>(
  fn: () => unknown,
  errorClass?: ErrorClass<E>,
  messageMatch?: string | RegExp,
): E {
  try {
    fn();
  } catch (error) {
    return expectError(error, errorClass, messageMatch);
  }
  throw new nodeAssert.AssertionError({ message: "expected an exception" });
}

/**
 * Awaits `subject` (a promise, or a function returning one) and returns what it rejected with,
 * checked as in {@link assertThrows}.
 */
export async function assertRejects<E extends Error = Error>(
  subject: Promise<unknown> | (() => Promise<unknown>),
  errorClass?: ErrorClass<E>,
  messageMatch?: string | RegExp,
): Promise<E> {
  try {
    await (typeof subject === "function" ? subject() : subject);
  } catch (error) {
    return expectError(error, errorClass, messageMatch);
  }
  throw new nodeAssert.AssertionError({ message: "expected a rejection" });
}
