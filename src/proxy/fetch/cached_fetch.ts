/**
 * Fetches through the response cache (see `response_cache.ts`): stored answers to fetches (with or
 * without `have` lines), handed only to clients the origin just vouched for.
 */
import type { ScheduleBasis } from "../core/deps.ts";
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import { cacheKey, keyedByTags } from "../core/response_cache.ts";
import { entryKey } from "../core/store_layout.ts";
import { noteBytesSaved } from "../ops/bytes_saved.ts";
import { windowedTee } from "../core/streams.ts";
import { TagDigest } from "../origin/tag_listings.ts";
import { OriginAnswerError } from "../origin/origin.ts";
import { forwardUploadPack, relay } from "../origin/forwarding.ts";
import { authorisedToFetch } from "../origin/fetch_probe.ts";
import type { ObjectFormat } from "../../git/object_id.ts";
import { type FetchCall, type PlanOf, scheduleBuild, servedAnswer } from "./fetch_call.ts";
import { type CommandRequest, serializeCommandRequest } from "../../git/command_request.ts";
import { type FetchArgs, serializeFetchArgs } from "../../git/fetch_request.ts";
import { UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";
import { recordOutcome } from "../core/request_record.ts";
import { inBackground } from "../core/deps.ts";

/** Bytes of an answer the copy going to the store may lag behind its client. */
export const CACHE_COPY_WINDOW_BYTES = 4 << 20;

export function responseCacheBytes(ctx: ProxyContext): number {
  return ctx.deps.config.responseCacheBytes;
}

/**
 * A fetch (a clone's, or an incremental one keyed by its haves), through the response cache (see
 * `response_cache.ts`). A stored answer goes only to a client the origin authorised to fetch
 * (the credential memo, else a probe fetch: fetch_probe.ts), looked up only after that.
 */
export async function cachedFetch(
  call: FetchCall,
  plan: PlanOf<"response-cache">,
): Promise<Response> {
  const res = await throughCache(call, plan.originReq, plan.originArgs, plan.build);
  call.ctx.registry?.noteFetch(call.repo, "cached", res.status === 200, call.seen);
  return res;
}

/** {@link cachedFetch}, asking the origin (on a miss) `req` with `args`. */
async function throughCache(
  call: FetchCall,
  req: CommandRequest,
  args: FetchArgs,
  build: ScheduleBasis | null,
): Promise<Response> {
  const { ctx, request, repo } = call;
  // Authorisation comes first and is the same whatever the cache holds or is filling: a caller
  // the origin did not vouch for gets the origin's refusal (or its own answer), having cost the
  // origin the same calls either way, so its answer tells nothing of what others fetched.
  const verdict = await authorisedToFetch(ctx, request, repo, args.wants, formatOf(req));
  if (verdict instanceof Response) return verdict;
  if (verdict !== "authorised") {
    return await forwardUploadPack(ctx, request, repo, serializeCommandRequest(req));
  }
  let tags = "-";
  if (keyedByTags(args)) {
    // The clone's own ls-refs listed the tags moments ago, most often (tag_listings.ts).
    const digest = ctx.tagListings?.digest(ctx, request, repo) ??
      await originTagDigest(ctx, request, repo, req);
    if (digest === null) {
      // The origin refused the credential (or failed): the fetch goes to it as it is.
      return await forwardUploadPack(ctx, request, repo, serializeCommandRequest(req));
    }
    tags = digest;
  }
  const storeKey = entryKey(repo.id, cacheKey(repo.id, req, args, tags));
  // A stored answer starts the build the fetch asked for, as the origin's own answer does (below):
  // it goes only to a client the origin vouched for, and without the build a repository whose
  // fetches all hit the cache would never get its snapshot, nor heal a damaged one.
  const stored = (hit: Response): Response => {
    scheduleBuild(call, build);
    return hit;
  };
  const hit = await cachedAnswer(ctx, storeKey, repo.id);
  if (hit) return stored(hit);
  const pending = ctx.cacheFills.pending(storeKey);
  if (pending && await pending) {
    const filled = await cachedAnswer(ctx, storeKey, repo.id);
    if (filled) return stored(filled);
  }
  let claim = ctx.cacheFills.claim(storeKey);
  if (!claim) {
    // Another request is filling this entry (it claimed while this one looked): wait for it
    // rather than have the origin compute the pack again.
    await ctx.cacheFills.pending(storeKey);
    const filled = await cachedAnswer(ctx, storeKey, repo.id);
    if (filled) return stored(filled);
    claim = ctx.cacheFills.claim(storeKey);
  }
  if (claim) {
    // A fill may have landed between this request's lookup and its claim.
    const landed = await cachedAnswer(ctx, storeKey, repo.id);
    if (landed) {
      claim.abandon();
      return stored(landed);
    }
  }
  recordOutcome(ctx, { action: "cache-miss" });
  const body = serializeCommandRequest({
    ...req,
    args: serializeFetchArgs({ ...args, noProgress: true }),
  });
  let origin: Response;
  try {
    origin = await forwardUploadPack(ctx, request, repo, body);
  } catch (err) {
    claim?.abandon();
    throw err;
  }
  // Only an answer the origin computed for this request starts a build; an `ERR` (an unknown
  // `want`) starts none and is not kept.
  const answer = await servedAnswer(call, origin, build, { req, args });
  const typeOk = origin.headers.get("content-type") === UPLOAD_PACK_RESULT_TYPE;
  if (!claim || !answer.served || !typeOk || !answer.body) {
    claim?.abandon();
    return relay(origin, answer.body);
  }
  // A slow client holds the origin back; a store falling behind loses the entry (streams.ts).
  const [toClient, toStore] = windowedTee(answer.body, CACHE_COPY_WINDOW_BYTES);
  inBackground(
    ctx.deps,
    claim.fill(ctx.deps.store, ctx.metrics, toStore, { maxBytes: responseCacheBytes(ctx) }),
  );
  return relay(origin, toClient);
}

/** A stored answer as a response, or null when there is none. */
async function cachedAnswer(
  ctx: ProxyContext,
  storeKey: string,
  repoId: string,
): Promise<Response | null> {
  const obj = await ctx.deps.store.get(storeKey);
  if (!obj) return null;
  recordOutcome(ctx, { action: "cache-hit" });
  // Every stored answer served is one the origin did not compute for this request.
  const body = obj.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, out) {
        ctx.metrics.inc("gitedge_response_cache_bytes_total", chunk.length);
        noteBytesSaved(ctx, repoId, chunk.length, "response-cache");
        out.enqueue(chunk);
      },
    }),
  );
  return new Response(body, {
    status: 200,
    headers: { "content-type": UPLOAD_PACK_RESULT_TYPE, "cache-control": "no-cache" },
  });
}

/** Largest ls-refs answer read for a tag digest. */
const MAX_TAG_LISTING = 16 << 20;

/**
 * SHA-256 of the origin's tags (`ls-refs peel ref-prefix refs/tags/`), asked with the client's
 * credentials; null unless the origin answered 200 (which also renews the credential memo).
 */
async function originTagDigest(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  req: CommandRequest,
): Promise<string | null> {
  const body = serializeCommandRequest({
    command: "ls-refs",
    capabilities: req.capabilities.filter((c) => c.startsWith("object-format=")),
    args: ["peel", "ref-prefix refs/tags/"],
  });
  const res = await forwardUploadPack(ctx, request, repo, body, "ls-refs");
  const url = `${repo.originUrl}/git-upload-pack`;
  if (res.status !== 200 || !res.body) {
    await res.body?.cancel();
    return null;
  }
  const digest = new TagDigest();
  let size = 0;
  try {
    for await (const chunk of res.body) {
      size += chunk.byteLength;
      if (size > MAX_TAG_LISTING) {
        throw new OriginAnswerError(url, `(ls-refs of tags) exceeds ${MAX_TAG_LISTING} bytes`);
      }
      digest.push(chunk);
    }
  } catch (err) {
    // An answer the origin cut short (its upload-pack died on the request) is the origin's
    // failure, a 502, not the edge's.
    if (err instanceof OriginAnswerError) throw err;
    throw new OriginAnswerError(url, "(ls-refs of tags) was cut short", { cause: err });
  }
  const value = digest.value();
  if (value === null) {
    throw new OriginAnswerError(url, "(ls-refs of tags) was cut short or malformed");
  }
  ctx.metrics.inc("gitedge_tag_digest_total", 1, { source: "origin" });
  return value;
}

/** The object format a request names (sha1 when it names none). */
function formatOf(req: CommandRequest): ObjectFormat {
  const named = req.capabilities.find((c) => c.startsWith("object-format="))?.slice(14);
  return named === "sha256" ? "sha256" : "sha1";
}
