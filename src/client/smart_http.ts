/**
 * The HTTP side of Git's smart protocol v2 for `git-upload-pack`: the capability advertisement
 * (`GET info/refs?service=git-upload-pack`) and command requests (`POST git-upload-pack`), with
 * credentials retried once after a 401. Parsing what flows over it lives in `src/git`.
 */
import type { CredentialManager } from "./credentials.ts";
import { AuthenticationError, HttpStatusError, NetworkError, NotSmartHttpError } from "./errors.ts";

const SERVICE = "git-upload-pack";

/** Options for {@link SmartHttpClient}. */
export interface SmartHttpOptions {
  credentials: CredentialManager;
  fetch?: typeof fetch;
  /** Sent as `User-Agent`. */
  userAgent?: string;
  signal?: AbortSignal;
}

/** Talks protocol v2 over HTTP to one repository. */
export class SmartHttpClient {
  readonly #credentials: CredentialManager;
  readonly #fetch: typeof fetch;
  readonly #userAgent: string;
  readonly #signal?: AbortSignal;
  #base: string;

  constructor(options: SmartHttpOptions) {
    this.#credentials = options.credentials;
    this.#fetch = options.fetch ?? fetch;
    this.#userAgent = options.userAgent ?? "git/2.39-gitedge";
    this.#signal = options.signal;
    this.#base = options.credentials.url.toString().replace(/\/+$/, "");
  }

  /** The repository URL requests go to (after any redirect of the advertisement). */
  get baseUrl(): string {
    return this.#base;
  }

  /**
   * Fetches the v2 capability advertisement and returns its body (pkt-lines). Follows redirects
   * and keeps using the redirected base URL, as git does. Rejects when
   * the server does not answer as a smart HTTP server ({@link NotSmartHttpError}).
   */
  async advertisement(): Promise<ReadableStream<Uint8Array>> {
    const url = `${this.#base}/info/refs?service=${SERVICE}`;
    const response = await this.#send(url, true, { method: "GET" });
    const suffix = `/info/refs?service=${SERVICE}`;
    if (response.redirected && response.url.endsWith(suffix)) {
      this.#base = response.url.slice(0, -suffix.length);
    }
    expectContentType(response, `application/x-${SERVICE}-advertisement`, url);
    return bodyOf(response, url);
  }

  /**
   * Sends one command request (already serialized pkt-lines) and returns the response body. With
   * `renew: false` a 401 fails at once instead of asking for new credentials (for a request sent
   * ahead of the advertisement, which asks for them itself).
   */
  async command(
    request: Uint8Array<ArrayBuffer>,
    options: { renew?: boolean } = {},
  ): Promise<ReadableStream<Uint8Array>> {
    const url = `${this.#base}/${SERVICE}`;
    const response = await this.#send(url, options.renew ?? true, {
      method: "POST",
      body: request,
      headers: {
        "content-type": `application/x-${SERVICE}-request`,
        accept: `application/x-${SERVICE}-result`,
      },
    });
    expectContentType(response, `application/x-${SERVICE}-result`, url);
    return bodyOf(response, url);
  }

  /** Sends with protocol and auth headers; after a 401 renews credentials (if `renew`) and retries. */
  async #send(url: string, renew: boolean, init: RequestInit): Promise<Response> {
    while (true) {
      const headers = new Headers(init.headers);
      headers.set("git-protocol", "version=2");
      headers.set("user-agent", this.#userAgent);
      const authorization = this.#credentials.authorization;
      if (authorization) headers.set("authorization", authorization);
      let response: Response;
      try {
        response = await this.#fetch(url, { ...init, headers, signal: this.#signal });
      } catch (error) {
        if (this.#signal?.aborted) throw this.#signal.reason;
        throw new NetworkError(url, error);
      }
      if (response.status === 401) {
        await response.body?.cancel();
        if (renew && await this.#credentials.renew()) continue;
        throw new AuthenticationError(url);
      }
      if (!response.ok) {
        const message = await errorMessage(response);
        throw new HttpStatusError(url, response.status, message || response.statusText);
      }
      await this.#credentials.confirm();
      return response;
    }
  }
}

/** At most this much of an error body is read for its message. */
const MAX_ERROR_BODY = 4096;

/**
 * The server's own words for an HTTP error (as git shows them): a `text/plain` body, first
 * {@link MAX_ERROR_BODY} bytes, control characters dropped, lines joined; "" when there is none.
 */
async function errorMessage(response: Response): Promise<string> {
  const type = response.headers.get("content-type")?.split(";")[0].trim().toLowerCase();
  if (type !== "text/plain" || !response.body) {
    await response.body?.cancel();
    return "";
  }
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < MAX_ERROR_BODY) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } catch {
    // A body cut short still says what it said.
  } finally {
    await reader.cancel().catch(() => {});
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) bytes.set(chunk, (at += chunk.byteLength) - chunk.byteLength);
  const text = new TextDecoder().decode(bytes.subarray(0, MAX_ERROR_BODY));
  return [...text].map((c) => (c < " " || c === "\x7f" ? " " : c)).join("")
    .replace(/\s+/g, " ").trim();
}

function expectContentType(response: Response, expected: string, url: string): void {
  const actual = response.headers.get("content-type")?.split(";")[0].trim();
  if (actual !== expected) {
    void response.body?.cancel();
    throw new NotSmartHttpError(
      url,
      `content type ${JSON.stringify(actual ?? null)}, expected ${expected}`,
    );
  }
}

function bodyOf(response: Response, url: string): ReadableStream<Uint8Array> {
  if (!response.body) throw new NotSmartHttpError(url, "empty response");
  return response.body;
}
