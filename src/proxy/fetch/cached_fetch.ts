/**
 * Fetches through the response cache (see `response_cache.ts`): stored answers to fetches (with or
 * without `have` lines), handed only to clients the origin just vouched for.
 */
import type { ScheduleBasis } from "../core/deps.ts";
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import { countingStream } from "../core/metrics.ts";
import { windowedTee } from "../core/streams.ts";
import { cacheKey, entryKey, keyedByTags } from "../core/response_cache.ts";
import { TagDigest } from "../origin/tag_listings.ts";
import { OriginAnswerError } from "../origin/origin.ts";
import {
  forwardUploadPack,
  inBackground,
  recentlyAuthorised,
  relay,
} from "../origin/forwarding.ts";
import { type FetchCall, type PlanOf, scheduleBuild, servedAnswer } from "./fetch_call.ts";
import { type CommandRequest, serializeCommandRequest } from "../../git/command_request.ts";
import { type FetchArgs, serializeFetchArgs } from "../../git/fetch_request.ts";
import { UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";

/** Bytes of an answer the copy going to the store may lag behind its client. */
export const CACHE_COPY_WINDOW_BYTES = 4 << 20;

export function responseCacheBytes(ctx: ProxyContext): number {
  return ctx.deps.config.responseCacheBytes;
}

/**
 * A fetch (a clone's, or an incremental one keyed by its haves), through the response cache (see
 * `response_cache.ts`). A stored answer goes only to a client the origin just authorised: when
 * the key has the origin's tags (see `keyedByTags`), by the ls-refs of tags the key needs anyway;
 * else by the credential memo. Anyone else's request goes to the origin, whose answer may fill
 * the cache.
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
  let tags = "-";
  let authorised: boolean;
  if (keyedByTags(args)) {
    // The clone's own ls-refs listed the tags moments ago, most often (tag_listings.ts).
    const digest = ctx.tagListings?.digest(ctx, request, repo) ??
      await originTagDigest(ctx, request, repo, req);
    if (digest === null) {
      // The origin refused the credential (or failed): the fetch goes to it as it is.
      return await forwardUploadPack(ctx, request, repo, serializeCommandRequest(req));
    }
    tags = digest;
    authorised = true;
  } else {
    authorised = recentlyAuthorised(ctx, request, repo);
  }
  const storeKey = entryKey(repo.id, cacheKey(repo.id, req, args, tags));
  if (!authorised && (ctx.responseCache.pending(storeKey) || await ctx.deps.store.head(storeKey))) {
    // An answer is there (or coming) but the memo has lapsed: ask the origin the cheap way (a
    // tag listing, no pack) rather than have it compute the pack again.
    if (await originTagDigest(ctx, request, repo, req) === null) {
      return await forwardUploadPack(ctx, request, repo, serializeCommandRequest(req));
    }
    authorised = true;
  }
  // A stored answer starts the build the fetch asked for, as the origin's own answer does (below):
  // it goes only to a client the origin vouched for, and without the build a repository whose
  // fetches all hit the cache would never get its snapshot, nor heal a damaged one.
  const stored = (hit: Response): Response => {
    scheduleBuild(call, build);
    return hit;
  };
  if (authorised) {
    const hit = await cachedAnswer(ctx, storeKey);
    if (hit) return stored(hit);
    const pending = ctx.responseCache.pending(storeKey);
    if (pending && await pending) {
      const filled = await cachedAnswer(ctx, storeKey);
      if (filled) return stored(filled);
    }
  }
  let claim = ctx.responseCache.claim(storeKey);
  if (!claim) {
    // Another request is filling this entry (it claimed while this one looked): wait for it
    // rather than have the origin compute the pack again, once the origin vouched for this one.
    if (!authorised) {
      if (await originTagDigest(ctx, request, repo, req) === null) {
        return await forwardUploadPack(ctx, request, repo, serializeCommandRequest(req));
      }
      authorised = true;
    }
    await ctx.responseCache.pending(storeKey);
    const filled = await cachedAnswer(ctx, storeKey);
    if (filled) return stored(filled);
    claim = ctx.responseCache.claim(storeKey);
  }
  if (claim && authorised) {
    // A fill may have landed between this request's lookup and its claim.
    const landed = await cachedAnswer(ctx, storeKey);
    if (landed) {
      claim.abandon();
      return stored(landed);
    }
  }
  ctx.metrics.inc("gitedge_response_cache_total", 1, { result: "miss" });
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
    ctx,
    claim.fill(ctx.deps.store, ctx.metrics, toStore, { maxBytes: responseCacheBytes(ctx) }),
  );
  return relay(origin, toClient);
}

/** A stored answer as a response, or null when there is none. */
async function cachedAnswer(ctx: ProxyContext, storeKey: string): Promise<Response | null> {
  const obj = await ctx.deps.store.get(storeKey);
  if (!obj) return null;
  ctx.metrics.inc("gitedge_response_cache_total", 1, { result: "hit" });
  const body = obj.body.pipeThrough(
    countingStream(ctx.metrics, "gitedge_response_cache_bytes_total"),
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
  const res = await forwardUploadPack(ctx, request, repo, body);
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
