/**
 * Talking to the origin on a client's behalf: calls counted into the metrics, the origin's answer
 * relayed with the headers a client may see, the credential memo kept from its verdicts, the
 * start of an upload-pack answer looked at, and work run off the client's critical path.
 */
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import { countingStream } from "../core/metrics.ts";
import { callOrigin, FORWARDED_RESPONSE_HEADERS, forwardHeaders } from "./origin.ts";
import { prefixed } from "../core/streams.ts";
import { concat } from "../../git/pktline.ts";

/** A response to the client carrying the origin's status, chosen headers and `body`. */
export function relay(
  origin: Response,
  body: ReadableStream<Uint8Array> | null,
  extra: Record<string, string> = {},
): Response {
  const headers = new Headers(extra);
  for (const name of FORWARDED_RESPONSE_HEADERS) {
    const v = origin.headers.get(name);
    if (v !== null && !headers.has(name)) headers.set(name, v);
  }
  return new Response(body, { status: origin.status, headers });
}

/** Calls the origin; the response body counts into `gitedge_origin_bytes_total` as it is read. */
export async function fromOrigin(
  ctx: ProxyContext,
  url: string,
  init: RequestInit,
): Promise<Response> {
  const res = await callOrigin(ctx.deps.originFetch, url, init);
  if (!res.body) return res;
  const body = res.body.pipeThrough(countingStream(ctx.metrics, "gitedge_origin_bytes_total"));
  return new Response(body, { status: res.status, headers: res.headers });
}

/** The memo key of the credential `request` carries for `repo`. */
function credentialKey(ctx: ProxyContext, request: Request, repo: RepoRef): string {
  return ctx.authMemo.key(repo.id, request.headers.get("authorization"));
}

/**
 * Records the origin's refusal of an upload-pack-service request (`info/refs`, `ls-refs`, any
 * command): a 401/403 drops the memo of the request's credential for this repository. Nothing
 * else renews it: an `ls-refs` the origin answers says nothing of whether it serves objects
 * (see {@link noteFetchVerdict}).
 */
export function noteOriginVerdict(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  status: number,
): void {
  if (status === 401 || status === 403) ctx.authMemo.forget(credentialKey(ctx, request, repo));
}

/**
 * Records the origin's answer to a `fetch` sent at `askedAt` (ms) with `request`'s credential: a
 * 200 renews the memo as of when it was asked (the origin's word is no newer than that), a
 * 401/403 drops it. Only a fetch answered by the origin now counts, never an answer sent ahead
 * or kept.
 */
export function noteFetchVerdict(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  status: number,
  askedAt: number,
): void {
  const key = credentialKey(ctx, request, repo);
  if (status === 200) ctx.authMemo.remember(key, askedAt);
  else if (status === 401 || status === 403) ctx.authMemo.forget(key);
}

/** Whether the origin accepted `request`'s credential for `repo` within the configured TTL. */
export function recentlyAuthorised(ctx: ProxyContext, request: Request, repo: RepoRef): boolean {
  const ttl = ctx.deps.config.authTtlSeconds;
  if (ttl <= 0) return false;
  return ctx.authMemo.accepted(credentialKey(ctx, request, repo), ctx.deps.clock.now(), ttl * 1000);
}

/**
 * Streams a request through to the origin unchanged (v0/v1 upload-pack, receive-pack, v2
 * commands the edge does not act on). The body is never held, so no size cap applies here: a
 * large push is the origin's to accept or refuse. `body` replaces the request's own (already
 * decoded: no content-encoding goes with it).
 */
export async function streamThrough(
  ctx: ProxyContext,
  request: Request,
  originUrl: string,
  body?: ReadableStream<Uint8Array>,
): Promise<Response> {
  const headers = forwardHeaders(request.headers);
  const enc = request.headers.get("content-encoding");
  if (enc && !body) headers.set("content-encoding", enc);
  const origin = await fromOrigin(ctx, originUrl, {
    method: "POST",
    headers,
    body: body ?? request.body,
    duplex: "half",
  } as RequestInit);
  return relay(origin, origin.body);
}

/**
 * POSTs `body` (a `command` request) to the origin's upload-pack with the client's headers; notes
 * the verdict (a 200 renews the credential memo only for a `fetch`).
 */
export async function forwardUploadPack(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  body: Uint8Array,
  command: "fetch" | "ls-refs" = "fetch",
): Promise<Response> {
  const askedAt = ctx.deps.clock.now();
  const origin = await fromOrigin(ctx, `${repo.originUrl}/git-upload-pack`, {
    method: "POST",
    headers: forwardHeaders(request.headers),
    body: body as Uint8Array<ArrayBuffer>,
  });
  if (command === "fetch") noteFetchVerdict(ctx, request, repo, origin.status, askedAt);
  else noteOriginVerdict(ctx, request, repo, origin.status);
  return origin;
}

/**
 * Looks at the start of an upload-pack answer: `served` when the origin said 200 and began with
 * something other than an `ERR` packet (or nothing at all). `body` is the whole answer still.
 */
export async function peekAnswer(
  origin: Response,
): Promise<{ served: boolean; body: ReadableStream<Uint8Array> | null }> {
  if (origin.status !== 200 || !origin.body) return { served: false, body: origin.body };
  const reader = origin.body.getReader();
  let head: Uint8Array = new Uint8Array(0);
  let ended = false;
  try {
    // The first 8 bytes: a packet header and, if it is one, "ERR ".
    while (head.length < 8) {
      const next = await reader.read();
      if (next.done) {
        ended = true;
        break;
      }
      head = head.length === 0 ? next.value : concat([head, next.value]);
    }
  } catch (error) {
    const failed = new ReadableStream<Uint8Array>({
      start: (controller) => controller.error(error),
    });
    return { served: false, body: failed };
  }
  const text = new TextDecoder().decode(head.subarray(4, 8));
  const served = head.length > 0 && text !== "ERR ";
  const rest = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (ended) return controller.close();
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel: (reason) => reader.cancel(reason),
  }, { highWaterMark: 0 });
  return { served, body: prefixed(head, rest) };
}
