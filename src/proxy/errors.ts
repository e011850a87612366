/** A client request the edge refuses; `status` is what the client gets. */
export class ClientRequestError extends Error {
  override name = "ClientRequestError";
  constructor(message: string, readonly status: 400 | 408 | 413 | 415 | 503) {
    super(message);
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
 * `error`'s message as it may be shown to clients (response bodies, `lastError` in status): any
 * `user:password@` of a URL and absolute filesystem paths of the server removed.
 */
export function publicMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message
    .replace(/(\b[a-z][a-z0-9+.-]*:\/\/)[^\/\s@]*@/gi, "$1***@")
    .replace(/(^|[\s'"`(\[=])\/(?!\/)[^\s'"`)\]]*/g, "$1<path>");
}
