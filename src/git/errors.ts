/**
 * Shared error base for everything under `src/git`.
 *
 * Every parser in this directory reports malformed or unexpected wire data by
 * throwing a `GitFormatError` (or a subclass). Callers can rely on that: any
 * other exception type coming out of a parser is a bug, not bad input.
 *
 * @module
 */

/** Options accepted by {@link GitFormatError}. */
export interface GitFormatErrorOptions {
  /** The underlying error, if this one wraps another. */
  cause?: unknown;
}

/**
 * Malformed, truncated or otherwise unacceptable Git wire data.
 *
 * `code` is a short stable machine-readable tag such as `"bad-length"`,
 * `"truncated"` or `"bad-request"`; `message` is for humans.
 */
export class GitFormatError extends Error {
  override name = "GitFormatError";
  /** Stable machine-readable reason, e.g. `"truncated"`. */
  readonly code: string;

  constructor(code: string, message: string, options?: GitFormatErrorOptions) {
    super(message, options);
    this.code = code;
  }
}
