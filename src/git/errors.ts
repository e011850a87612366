/**
 * Shared error base for everything under `src/git`, and the protocol v2 message errors.
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

/** A protocol v2 message had the wrong structure; `code` says which part. */
export class ProtocolError extends GitFormatError {
  override name = "ProtocolError";
}

/** The server sent an `ERR <message>` packet (band 3 of side-band: `SidebandRemoteError`). */
export class ProtocolRemoteError extends GitFormatError {
  override name = "ProtocolRemoteError";
  /** The server's message. */
  readonly remoteMessage: string;

  constructor(remoteMessage: string) {
    super("remote-error", `remote error: ${remoteMessage}`);
    this.remoteMessage = remoteMessage;
  }
}

/** Throws {@link ProtocolRemoteError} if `line` is an `ERR` packet. */
export function rejectErrLine(line: string): void {
  if (line.startsWith("ERR ")) throw new ProtocolRemoteError(line.slice(4));
}
