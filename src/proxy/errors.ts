/** A client request the edge refuses; `status` is what the client gets. */
export class ClientRequestError extends Error {
  override name = "ClientRequestError";
  constructor(message: string, readonly status: 400 | 413 | 415) {
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
