/**
 * Typed errors raised by the gitedge client. Each carries the facts a caller needs to decide what
 * to do (retry, report, pick an exit code) without parsing messages. URLs are redacted before they
 * reach a message, so credentials never end up in output.
 */
import { redactUrl } from "../redact.ts";

/**
 * An HTTP response whose status the client cannot use.
 *
 * @example Which status a URL answered
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof HttpStatusError) console.error(`${error.status} from ${error.url}`);
 * }
 * ```
 */
export class HttpStatusError extends Error {
  override name = "HttpStatusError";
  constructor(readonly url: string, readonly status: number, detail = "") {
    super(`HTTP ${status} from ${redactUrl(url)}${detail ? `: ${detail}` : ""}`);
  }
}

/**
 * No bytes arrived within the idle timeout (headers or body).
 *
 * @example A download that went quiet
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof StallError) console.error(`nothing for ${error.timeoutMs} ms`);
 * }
 * ```
 */
export class StallError extends Error {
  override name = "StallError";
  constructor(readonly url: string, readonly timeoutMs: number) {
    super(`no data from ${redactUrl(url)} for ${timeoutMs} ms`);
  }
}

/**
 * The body ended before the advertised length was received.
 *
 * @example A body cut short
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof TruncatedBodyError) console.error(`${error.received} of ${error.expected}`);
 * }
 * ```
 */
export class TruncatedBodyError extends Error {
  override name = "TruncatedBodyError";
  constructor(readonly url: string, readonly received: number, readonly expected: number) {
    super(`body from ${redactUrl(url)} ended after ${received} of ${expected} bytes`);
  }
}

/**
 * A ranged request was answered with something that cannot continue the bytes already received.
 *
 * @example A resume the server could not continue
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof RangeMismatchError) console.error(`at byte ${error.expectedStart}`);
 * }
 * ```
 */
export class RangeMismatchError extends Error {
  override name = "RangeMismatchError";
  constructor(readonly url: string, readonly expectedStart: number, detail: string) {
    super(`cannot resume ${redactUrl(url)} at byte ${expectedStart}: ${detail}`);
  }
}

/**
 * `git index-pack` rejected the stream (corrupt, truncated or otherwise invalid pack).
 *
 * @example What `git index-pack` said
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof IndexPackError) console.error(error.code, error.stderr);
 * }
 * ```
 */
export class IndexPackError extends Error {
  override name = "IndexPackError";
  constructor(readonly code: number | null, readonly stderr: string, options?: ErrorOptions) {
    super(
      `git index-pack failed${code === null ? "" : ` (exit ${code})`}: ${
        stderr.trim() || "no message"
      }`,
      options,
    );
  }
}

/**
 * The index the edge sent does not fit its pack (or the pack is not the announced one). Lives here,
 * not in `edge_index.ts`, so that naming it does not load that module (and `node:crypto`, ~25 ms
 * of each CLI start).
 *
 * @example The edge's index refused (with `trustEdgeIndex`)
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof EdgeIndexError) console.error(`refused the index of ${error.uri}`);
 * }
 * ```
 */
export class EdgeIndexError extends Error {
  override name = "EdgeIndexError";
  constructor(readonly uri: string, detail: string) {
    super(`the pack index the edge sent for ${redactUrl(uri)} was refused: ${detail}`);
  }
}

/**
 * A pack was indexed but its checksum is not the one the server advertised.
 *
 * @example A pack that is not the announced one
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof VerificationError) console.error(error.expected, error.actual);
 * }
 * ```
 */
export class VerificationError extends Error {
  override name = "VerificationError";
  constructor(readonly uri: string, readonly expected: string, readonly actual: string) {
    super(`pack downloaded from ${redactUrl(uri)} has hash ${actual}, expected ${expected}`);
  }
}

/**
 * A packfile URI could not be downloaded after every attempt.
 *
 * @example A URI that failed every attempt
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof PackfileDownloadError) console.error(error.uri, error.attempts, error.lastCause);
 * }
 * ```
 */
export class PackfileDownloadError extends Error {
  override name = "PackfileDownloadError";
  constructor(readonly uri: string, readonly attempts: number, readonly lastCause: unknown) {
    super(
      `failed to download ${redactUrl(uri)} after ${attempts} attempt${
        attempts === 1 ? "" : "s"
      }: ${lastCause instanceof Error ? lastCause.message : String(lastCause)}`,
      { cause: lastCause },
    );
  }
}

/**
 * A git subprocess used by the client failed.
 *
 * @example A git command that failed
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof GitProcessError) console.error(`git ${error.args.join(" ")}: ${error.code}`);
 * }
 * ```
 */
export class GitProcessError extends Error {
  override name = "GitProcessError";
  constructor(readonly args: string[], readonly code: number, readonly stderr: string) {
    super(`git ${args.join(" ")} exited with ${code}: ${stderr.trim() || "no message"}`);
  }
}

/**
 * The URL answered, but not as a Git smart-HTTP server (wrong content type, empty body).
 *
 * @example A URL that is no smart-HTTP repository
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof NotSmartHttpError) console.error(`not a git repository: ${error.url}`);
 * }
 * ```
 */
export class NotSmartHttpError extends Error {
  override name = "NotSmartHttpError";
  constructor(readonly url: string, detail: string) {
    super(`${redactUrl(url)} is not a smart HTTP git repository: ${detail}`);
  }
}

/**
 * The server refused our credentials (or we had none to offer).
 *
 * @example Credentials refused
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof AuthenticationError) console.error(`no access to ${error.url}`);
 * }
 * ```
 */
export class AuthenticationError extends Error {
  override name = "AuthenticationError";
  constructor(readonly url: string) {
    super(`authentication failed for ${redactUrl(url)}`);
  }
}

/**
 * The command line could not be understood.
 *
 * @example The command line as `gitedge clone` refuses it
 * ```ts
 * import { parseCloneArgs } from "./clone_cli.ts";
 *
 * try {
 *   parseCloneArgs(["--jobs"]);
 * } catch (error) {
 *   if (error instanceof UsageError) console.error(error.message);
 * }
 * ```
 */
export class UsageError extends Error {
  override name = "UsageError";
}

/**
 * A request could not be completed at the network level (DNS, refused, reset, TLS).
 *
 * @example A host that could not be reached
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof NetworkError) console.error(`cannot reach ${error.url}`, error.cause);
 * }
 * ```
 */
export class NetworkError extends Error {
  override name = "NetworkError";
  constructor(readonly url: string, cause: unknown) {
    super(
      `cannot reach ${redactUrl(url)}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
}

/**
 * The objects received do not connect every ref to complete history.
 *
 * @example Objects that do not complete the history
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof ConnectivityError) console.error(error.stderr);
 * }
 * ```
 */
export class ConnectivityError extends Error {
  override name = "ConnectivityError";
  constructor(readonly stderr: string) {
    super(`received objects are incomplete: ${stderr.trim() || "connectivity check failed"}`);
  }
}

/**
 * The clone cannot proceed for a reason that is neither network nor verification.
 *
 * @example Any other reason a clone stopped
 * ```ts
 * import { clone } from "./clone.ts";
 *
 * try {
 *   await clone({ url: "https://edge.example/x/y.git" });
 * } catch (error) {
 *   if (error instanceof CloneError) console.error(error.message);
 * }
 * ```
 */
export class CloneError extends Error {
  override name = "CloneError";
}
