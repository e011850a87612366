/**
 * The edge's errors that answer a client: one base class, {@link EdgeHttpError}, carrying the
 * status the client gets and writing its own response. `app.ts` answers any of them with
 * `err.response()`; anything else is an internal error (500, details in the edge's log).
 */
import { publicMessage } from "../../redact.ts";
import { GitFormatError } from "../../git/errors.ts";

/** Statuses an {@link EdgeHttpError} answers with. */
export type EdgeErrorStatus = 400 | 403 | 404 | 408 | 413 | 415 | 502 | 503;

/**
 * An error that owns its response: `status`, and a text/plain body git prints to its user,
 * `gitedge: <prefix><message>` with the message through {@link publicMessage}.
 */
export class EdgeHttpError extends Error {
  override name = "EdgeHttpError";
  constructor(
    message: string,
    readonly status: EdgeErrorStatus,
    options?: ErrorOptions & { prefix?: string },
  ) {
    super(message, options);
    this.#prefix = options?.prefix ?? "";
  }

  readonly #prefix: string;

  /** The response the client gets. */
  response(): Response {
    return new Response(`gitedge: ${this.#prefix}${publicMessage(this)}\n`, {
      status: this.status,
      headers: { "content-type": "text/plain; charset=UTF-8" },
    });
  }
}

/** A client request the edge refuses; `status` is what the client gets. */
export class ClientRequestError extends EdgeHttpError {
  override name = "ClientRequestError";
  constructor(message: string, override readonly status: 400 | 408 | 413 | 415 | 503) {
    super(message, status);
  }
}

/** A client request body exceeded `config.maxRequestBytes`. */
export class RequestTooLargeError extends ClientRequestError {
  override name = "RequestTooLargeError";
  constructor(message: string) {
    super(message, 413);
  }
}

/**
 * Malformed Git wire data (a {@link GitFormatError} from `src/git`, which knows nothing of HTTP)
 * as the client sees it: 400, `gitedge: bad request: <message>`.
 */
export class MalformedGitDataError extends EdgeHttpError {
  override name = "MalformedGitDataError";
  constructor(cause: GitFormatError) {
    super(cause.message, 400, { cause, prefix: "bad request: " });
  }
}

/** `err` as an error that owns its response, or null for an internal error. */
export function edgeHttpError(err: unknown): EdgeHttpError | null {
  if (err instanceof EdgeHttpError) return err;
  if (err instanceof GitFormatError) return new MalformedGitDataError(err);
  return null;
}
