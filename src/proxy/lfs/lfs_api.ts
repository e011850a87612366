/**
 * The LFS API under `<repo>/info/lfs/`, passed through to the origin's LFS endpoint with the
 * caller's credentials. Nothing of it is cached. One change: in a batch answer to a download that
 * the origin authorised (200), each granted object's `download` action becomes a signed, expiring
 * edge URL (`lfs_urls.ts`); the origin's href and header are kept in memory for the fill only
 * (`lfs_grants.ts`). Uploads, verify actions and the locks API reach the origin as they are.
 */
import { recordOutcome } from "../core/request_record.ts";
import type { ProxyContext } from "../core/context.ts";
import { publicBase } from "../core/context.ts";
import type { RepoRef } from "../core/repo.ts";
import { callOrigin } from "../origin/origin.ts";
import { requestBody } from "../origin/request_body.ts";
import { ClientRequestError } from "../core/errors.ts";
import { LfsGrants } from "./lfs_grants.ts";
import type { LfsState } from "./lfs_objects.ts";
import {
  BatchAnswerError,
  BatchRequestError,
  grantedObjects,
  LFS_MEDIA_TYPE,
  lfsEndpoint,
  lfsError,
  lfsForwardHeaders,
  MAX_BATCH_ANSWER_BYTES,
  MAX_BATCH_REQUEST_BYTES,
  originBatch,
  parseBatchRequest,
  readBounded,
  relayLfs,
} from "./lfs_origin.ts";
import { callerTag, signedLfsUrl } from "./lfs_urls.ts";

/** The request body, read whole within `max` bytes (and the edge's parse budget and timeout). */
async function readRequest(
  ctx: ProxyContext,
  request: Request,
  max: number,
): Promise<Uint8Array | Response> {
  const guarded = requestBody(ctx, request);
  try {
    const bytes = await readBounded(guarded.stream, max);
    if (!bytes) return lfsError(413, `LFS request body exceeds ${max} bytes`);
    return bytes;
  } catch (error) {
    if (error instanceof ClientRequestError) return lfsError(error.status, error.message);
    throw error;
  } finally {
    guarded.release();
  }
}

/** `POST <repo>/info/lfs/objects/batch`. */
export async function handleLfsBatch(
  ctx: ProxyContext,
  lfs: LfsState,
  request: Request,
  repo: RepoRef,
  url: URL,
): Promise<Response> {
  const max = Math.min(MAX_BATCH_REQUEST_BYTES, ctx.deps.config.maxRequestBytes);
  const body = await readRequest(ctx, request, max);
  if (body instanceof Response) return body;
  let batch;
  try {
    batch = parseBatchRequest(body);
  } catch (error) {
    if (error instanceof BatchRequestError) return lfsError(error.status, error.message);
    throw error;
  }
  const origin = await originBatch(ctx, repo, lfsForwardHeaders(request.headers), body);
  // Refusals (401, 403, 404, …), uploads and anything but a 200 reach the caller as they came.
  if (origin.status !== 200 || batch.operation !== "download") {
    if (batch.operation === "upload") {
      ctx.metrics.inc("gitedge_lfs_batches_total", 1, { op: "upload" });
    }
    return relayLfs(origin, origin.body);
  }
  ctx.metrics.inc("gitedge_lfs_batches_total", 1, { op: "download" });
  const bytes = await readBounded(origin.body, MAX_BATCH_ANSWER_BYTES);
  if (!bytes) {
    return lfsError(502, `the origin's batch answer exceeds ${MAX_BATCH_ANSWER_BYTES} bytes`);
  }
  let rewritten: Record<string, unknown>;
  try {
    rewritten = await rewriteDownloads(ctx, lfs, request, repo, url, bytes, batch.objects);
  } catch (error) {
    if (error instanceof BatchAnswerError) {
      ctx.deps.log?.log("warn", "lfs.origin.garbage", { repo: repo.path, detail: error.message });
      return lfsError(502, `the origin's LFS server answered garbage: ${error.message}`);
    }
    throw error;
  }
  return new Response(JSON.stringify(rewritten), {
    status: 200,
    headers: { "content-type": LFS_MEDIA_TYPE, "cache-control": "no-store" },
  });
}

/**
 * The origin's batch answer `bytes` with each granted download pointing at the edge: a signed URL
 * bound to the repository, the oid, its size and the caller, valid for `urlTtlSeconds`. The
 * origin's href and header are remembered for the fill; the action carries the caller's own
 * credential back (so a fill in another process can ask the origin again on the caller's behalf).
 */
async function rewriteDownloads(
  ctx: ProxyContext,
  lfs: LfsState,
  request: Request,
  repo: RepoRef,
  url: URL,
  bytes: Uint8Array,
  asked: { oid: string; size: number }[],
): Promise<Record<string, unknown>> {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    throw new BatchAnswerError("its batch answer is not JSON");
  }
  const { answer, granted } = grantedObjects(json, asked, lfsEndpoint(ctx, repo));
  const authorization = request.headers.get("authorization");
  const tag = await callerTag(ctx.signer, authorization);
  const nowMs = ctx.deps.clock.now();
  const now = Math.floor(nowMs / 1000);
  const base = publicBase(ctx, url);
  const objects = answer.objects as Record<string, unknown>[];
  for (const { index, object } of granted) {
    const { href, expires } = await signedLfsUrl(
      ctx.signer,
      base,
      repo,
      object.oid,
      object.size,
      tag,
      now,
      ctx.deps.config.urlTtlSeconds,
    );
    lfs.grants.remember(
      LfsGrants.key(repo.id, object.oid, tag),
      { href: object.href, header: object.header },
      expires * 1000,
    );
    lfs.pin(object.oid, expires * 1000);
    const action: Record<string, unknown> = {
      href,
      expires_at: new Date(expires * 1000).toISOString(),
      expires_in: Math.max(0, expires - now),
    };
    if (authorization !== null) action.header = { Authorization: authorization };
    const entry = { ...objects[index] };
    entry.actions = { ...(entry.actions as Record<string, unknown>), download: action };
    // The edge URL needs no credentials git-lfs would add on its own.
    entry.authenticated = true;
    objects[index] = entry;
  }
  recordOutcome(ctx, { action: "lfs-rewrote", urls: granted.length });
  return answer;
}

/** Anything else under `<repo>/info/lfs/` (locks, verify, …): to the origin as it is. */
export async function handleLfsPassThrough(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  rest: string,
  url: URL,
): Promise<Response> {
  const method = request.method;
  if (!["GET", "HEAD", "POST", "PUT", "DELETE"].includes(method)) {
    return lfsError(405, `method ${method} is not part of the LFS API`);
  }
  let body: Uint8Array | undefined;
  if (method === "POST" || method === "PUT" || method === "DELETE") {
    const read = await readRequest(ctx, request, ctx.deps.config.maxRequestBytes);
    if (read instanceof Response) return read;
    body = read;
  }
  ctx.metrics.inc("gitedge_lfs_passthrough_total", 1, {
    api: rest.startsWith("locks") ? "locks" : "other",
  });
  const target = `${lfsEndpoint(ctx, repo)}${rest ? `/${rest}` : ""}${url.search}`;
  const origin = await callOrigin(ctx.deps.originFetch, target, {
    method,
    headers: lfsForwardHeaders(request.headers),
    body: body as Uint8Array<ArrayBuffer> | undefined,
  });
  return relayLfs(origin, method === "HEAD" ? null : origin.body);
}
