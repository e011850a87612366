/**
 * The origin's Git LFS API as the edge calls it: where it is, the headers that go to it, its
 * batch answers read within bounds, and errors in the LFS API's own shape.
 */
import type { ProxyContext } from "../core/context.ts";
import type { RepoRef } from "../core/repo.ts";
import { callOrigin } from "../origin/origin.ts";
import { OID } from "./lfs_urls.ts";

/** The LFS API's media type (requests and answers). */
export const LFS_MEDIA_TYPE = "application/vnd.git-lfs+json";

/** Largest batch request the edge reads (git-lfs sends at most 100 objects per batch: ~15 KB). */
export const MAX_BATCH_REQUEST_BYTES = 1 << 20;
/** Largest batch answer the edge reads from the origin to rewrite. */
export const MAX_BATCH_ANSWER_BYTES = 8 << 20;
/** Most objects in one batch request. */
export const MAX_BATCH_OBJECTS = 1000;

/** Request headers that go to the origin's LFS API. */
const FORWARDED = ["authorization", "accept", "content-type", "user-agent", "accept-language"];
/** Response headers of the origin's LFS API that reach the client. */
export const LFS_RESPONSE_HEADERS = [
  "content-type",
  "lfs-authenticate",
  "www-authenticate",
  "retry-after",
  "ratelimit-limit",
  "ratelimit-remaining",
  "ratelimit-reset",
];

/**
 * The origin's LFS endpoint of `repo`, no trailing slash: `<origin repository URL>/info/lfs`
 * (where git-lfs derives it), or under `lfsOrigin` when the operator set one (single-origin mode).
 */
export function lfsEndpoint(ctx: ProxyContext, repo: RepoRef): string {
  const { lfsOrigin, origin } = ctx.deps.config;
  if (lfsOrigin && origin) {
    const base = origin.replace(/\/+$/, "");
    return `${lfsOrigin.replace(/\/+$/, "")}${repo.originUrl.slice(base.length)}/info/lfs`;
  }
  return `${repo.originUrl}/info/lfs`;
}

/** The headers of `incoming` that go to the origin's LFS API. */
export function lfsForwardHeaders(incoming: Headers): Headers {
  const out = new Headers();
  for (const name of FORWARDED) {
    const v = incoming.get(name);
    if (v !== null) out.set(name, v);
  }
  return out;
}

/** An answer in the LFS API's error shape (`{"message": …}`), never cached. */
export function lfsError(status: number, message: string): Response {
  return new Response(JSON.stringify({ message: `gitedge: ${message}` }), {
    status,
    headers: { "content-type": LFS_MEDIA_TYPE, "cache-control": "no-store" },
  });
}

/** A response to the client carrying the origin's status, its LFS headers and `body`. */
export function relayLfs(origin: Response, body: BodyInit | null): Response {
  const headers = new Headers({ "cache-control": "no-store" });
  for (const name of LFS_RESPONSE_HEADERS) {
    const v = origin.headers.get(name);
    if (v !== null) headers.set(name, v);
  }
  return new Response(body, { status: origin.status, headers });
}

/** Reads `body` whole, or returns null past `max` bytes (the rest is cancelled). */
export async function readBounded(
  body: ReadableStream<Uint8Array> | null,
  max: number,
): Promise<Uint8Array | null> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => {});
      return null;
    }
    parts.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** One object of a batch request. */
export interface BatchObject {
  oid: string;
  size: number;
}

/** A batch request as the edge checked it. */
export interface BatchRequest {
  operation: "download" | "upload";
  objects: BatchObject[];
}

/** A batch request the edge refuses: `status` (400 malformed, 422 an invalid object). */
export class BatchRequestError extends Error {
  override name = "BatchRequestError";
  constructor(message: string, readonly status: 400 | 422) {
    super(message);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Parses and checks a batch request's JSON (`bytes`); throws {@link BatchRequestError}. */
export function parseBatchRequest(bytes: Uint8Array): BatchRequest {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw new BatchRequestError("batch request is not JSON", 400);
  }
  if (!isRecord(json)) throw new BatchRequestError("batch request is not a JSON object", 400);
  const { operation, objects } = json;
  if (operation !== "download" && operation !== "upload") {
    throw new BatchRequestError('batch operation must be "download" or "upload"', 422);
  }
  if (!Array.isArray(objects)) throw new BatchRequestError("batch objects must be a list", 400);
  if (objects.length > MAX_BATCH_OBJECTS) {
    throw new BatchRequestError(`batch of more than ${MAX_BATCH_OBJECTS} objects`, 422);
  }
  const checked = objects.map((o): BatchObject => {
    if (!isRecord(o) || typeof o.oid !== "string" || !OID.test(o.oid)) {
      throw new BatchRequestError("object oid must be 64 lower-case hex digits", 422);
    }
    if (typeof o.size !== "number" || !Number.isSafeInteger(o.size) || o.size < 0) {
      throw new BatchRequestError(`object ${o.oid} has an invalid size`, 422);
    }
    return { oid: o.oid, size: o.size };
  });
  return { operation, objects: checked };
}

/** A batch answer's object with a download action, as the edge rewrites it. */
export interface GrantedObject {
  oid: string;
  size: number;
  href: string;
  header: Record<string, string>;
}

/** The origin's batch answer was not the LFS API's JSON (502 to the client). */
export class BatchAnswerError extends Error {
  override name = "BatchAnswerError";
}

/**
 * Checks the origin's batch answer (`json`, parsed) for the download of `asked`: an object, its
 * `objects` a list; each object with a download action names an oid that was asked for, with its
 * size, and an http(s) href. Returns the answer and its granted objects (in order, with their
 * index in `objects`); throws {@link BatchAnswerError}.
 */
export function grantedObjects(
  json: unknown,
  asked: BatchObject[],
  /** The origin's LFS endpoint: a href to a private address is refused unless it is this host. */
  endpoint?: string,
): { answer: Record<string, unknown>; granted: { index: number; object: GrantedObject }[] } {
  if (!isRecord(json) || !Array.isArray(json.objects)) {
    throw new BatchAnswerError("its batch answer has no objects list");
  }
  const sizes = new Map(asked.map((o) => [o.oid, o.size]));
  const granted: { index: number; object: GrantedObject }[] = [];
  json.objects.forEach((o: unknown, index: number) => {
    if (!isRecord(o)) throw new BatchAnswerError("its batch answer has an object that is not one");
    const download = isRecord(o.actions) ? o.actions.download : undefined;
    if (download === undefined) return;
    if (typeof o.oid !== "string" || !sizes.has(o.oid)) {
      throw new BatchAnswerError("its batch answer grants an object that was not asked for");
    }
    if (o.size !== sizes.get(o.oid)) {
      throw new BatchAnswerError(`its batch answer gives object ${o.oid} another size`);
    }
    if (!isRecord(download) || typeof download.href !== "string") {
      throw new BatchAnswerError(`its download action for ${o.oid} has no href`);
    }
    let url: URL;
    try {
      url = new URL(download.href);
    } catch {
      throw new BatchAnswerError(`its download href for ${o.oid} is not a URL`);
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      throw new BatchAnswerError(`its download href for ${o.oid} is not http(s)`);
    }
    if (endpoint !== undefined && !hrefAllowed(url, endpoint)) {
      throw new BatchAnswerError(`its download href for ${o.oid} names a private address`);
    }
    const header: Record<string, string> = {};
    if (download.header !== undefined) {
      if (!isRecord(download.header)) {
        throw new BatchAnswerError(`its download header for ${o.oid} is not an object`);
      }
      for (const [k, v] of Object.entries(download.header)) {
        if (typeof v !== "string") {
          throw new BatchAnswerError(`its download header for ${o.oid} is not strings`);
        }
        header[k] = v;
      }
    }
    granted.push({
      index,
      object: { oid: o.oid, size: o.size as number, href: download.href, header },
    });
  });
  return { answer: json, granted };
}

/**
 * Whether the edge may fetch `href`, handed out by the LFS server at `endpoint`: any public host,
 * and the endpoint's own host; never another loopback, private or link-local address (by name or
 * literal), so an origin cannot point the edge at what only the edge can reach. Names are not
 * resolved here: a public name resolving to a private address is the operator's network's to stop.
 */
export function hrefAllowed(href: URL, endpoint: string): boolean {
  let own: string;
  try {
    own = new URL(endpoint).hostname;
  } catch {
    return false;
  }
  const host = href.hostname.toLowerCase();
  if (host === own.toLowerCase()) return true;
  if (host === "localhost" || host.endsWith(".localhost") || host.endsWith(".internal")) {
    return false;
  }
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(host);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return !(a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) ||
      (a === 100 && b >= 64 && b <= 127));
  }
  if (host.startsWith("[")) {
    const v6 = host.slice(1, -1);
    return !(v6 === "::1" || v6 === "::" || /^f[cd]/.test(v6) || /^fe[89ab]/.test(v6) ||
      v6.startsWith("::ffff:"));
  }
  return true;
}

/**
 * Asks the origin's batch API to download `objects` of `repo` with the credential `authorization`
 * (none: anonymous): the origin's response as it came (the caller reads or cancels its body).
 */
export async function originBatch(
  ctx: ProxyContext,
  repo: RepoRef,
  headers: Headers,
  body: Uint8Array,
): Promise<Response> {
  headers.set("content-type", LFS_MEDIA_TYPE);
  headers.set("accept", LFS_MEDIA_TYPE);
  return await callOrigin(ctx.deps.originFetch, `${lfsEndpoint(ctx, repo)}/objects/batch`, {
    method: "POST",
    headers,
    body: body as Uint8Array<ArrayBuffer>,
  });
}
