/** Talking to the origin: request building and typed failures. */
import type { OriginAuth, OriginFetch, RepoRef } from "./deps.ts";
import { EdgeHttpError } from "./errors.ts";

/** The origin could not be reached (connection refused, DNS, reset): 502 to the client. */
export class OriginUnreachableError extends EdgeHttpError {
  override name = "OriginUnreachableError";
  constructor(readonly url: string, cause: unknown) {
    super(
      `origin unreachable: ${url}: ${cause instanceof Error ? cause.message : String(cause)}`,
      502,
      { cause },
    );
  }
}

/** The origin answered `originStatus`, not success: 502 to the client. */
export class OriginStatusError extends EdgeHttpError {
  override name = "OriginStatusError";
  constructor(readonly url: string, readonly originStatus: number, detail: string) {
    super(`origin answered ${originStatus} for ${url}${detail ? `: ${detail}` : ""}`, 502);
  }
}

/**
 * The origin answered with a redirect. The edge never follows one: a redirect may point at a host
 * the edge must not reach (it is no open proxy) and would carry the client's credentials there.
 * Git sees a 502 saying so; point the edge at the final URL instead.
 */
export class OriginRedirectError extends EdgeHttpError {
  override name = "OriginRedirectError";
  constructor(readonly url: string, readonly originStatus: number) {
    super(
      `origin answered ${originStatus} (a redirect) for ${url}; the edge does not follow origin ` +
        `redirects: configure the origin's final URL`,
      502,
    );
  }
}

/** Request headers a client may send that the origin needs; everything else stays at the edge. */
const FORWARDED_REQUEST_HEADERS = [
  "authorization",
  "git-protocol",
  "content-type",
  "accept",
  "user-agent",
  "accept-language",
];

/**
 * Response headers of the origin that reach the client. Not `content-encoding`: fetch hands us
 * the body already decoded, in Deno and in Workers alike.
 */
export const FORWARDED_RESPONSE_HEADERS = [
  "content-type",
  "cache-control",
  "expires",
  "pragma",
  "www-authenticate",
];

/** The headers of `incoming` that go to the origin. */
export function forwardHeaders(incoming: Headers): Headers {
  const out = new Headers();
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const v = incoming.get(name);
    if (v !== null) out.set(name, v);
  }
  return out;
}

/** The credential-bearing headers of a request, for a background build (memory only). */
export function authOf(incoming: Headers): OriginAuth {
  const headers: Record<string, string> = {};
  const v = incoming.get("authorization");
  if (v !== null) headers["authorization"] = v;
  return { headers };
}

/**
 * Calls the origin, turning network failures into `OriginUnreachableError` and redirects (never
 * followed) into `OriginRedirectError`.
 */
export async function callOrigin(
  originFetch: OriginFetch,
  url: string,
  init: RequestInit,
): Promise<Response> {
  let res: Response;
  try {
    res = await originFetch(new Request(url, { ...init, redirect: "manual" }));
  } catch (err) {
    throw new OriginUnreachableError(url, err);
  }
  if (res.status >= 300 && res.status < 400 && res.status !== 304) {
    await res.body?.cancel().catch(() => {});
    throw new OriginRedirectError(url, res.status);
  }
  return res;
}

/** POSTs a protocol-v2 command to the origin's upload-pack and requires a 200. */
export async function postUploadPack(
  originFetch: OriginFetch,
  repo: RepoRef,
  auth: OriginAuth,
  body: Uint8Array,
): Promise<Response> {
  const url = `${repo.originUrl}/git-upload-pack`;
  const res = await callOrigin(originFetch, url, {
    method: "POST",
    headers: {
      ...auth.headers,
      "content-type": "application/x-git-upload-pack-request",
      "accept": "application/x-git-upload-pack-result",
      "git-protocol": "version=2",
    },
    body: body as Uint8Array<ArrayBuffer>,
  });
  if (res.status !== 200) {
    throw new OriginStatusError(url, res.status, await headOfBody(res, 200));
  }
  return res;
}

/** GETs the origin's protocol-v2 upload-pack advertisement; requires a 200. */
export async function getUploadPackAdvertisement(
  originFetch: OriginFetch,
  repo: RepoRef,
  auth: OriginAuth,
): Promise<Response> {
  const url = `${repo.originUrl}/info/refs?service=git-upload-pack`;
  const res = await callOrigin(originFetch, url, {
    method: "GET",
    headers: { ...auth.headers, "git-protocol": "version=2" },
  });
  if (res.status !== 200) {
    throw new OriginStatusError(url, res.status, await headOfBody(res, 200));
  }
  return res;
}

/** The first `max` bytes of a response body as text; the rest is discarded unread. */
async function headOfBody(res: Response, max: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  try {
    const { value } = await reader.read();
    return value ? new TextDecoder().decode(value.subarray(0, max)).trim() : "";
  } catch {
    return "";
  } finally {
    await reader.cancel().catch(() => {});
  }
}
