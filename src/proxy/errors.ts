/** A client request body exceeded `config.maxRequestBytes`. */
export class RequestTooLargeError extends Error {
  override name = "RequestTooLargeError";
}
