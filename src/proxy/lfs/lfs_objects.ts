/**
 * Serving LFS objects: `GET|HEAD /_edge/lfs/<repo id>/<oid>?r=…&size=…&c=…&exp=…&sig=…`, the URLs
 * the batch answers hand out (`lfs_api.ts`). Only signed, unexpired URLs are served.
 *
 * An object in the store is served from it (Range, immutable caching). One that is not is fetched
 * from the origin's download href once (single-flight in this process: concurrent requests wait
 * for the fill and are served from the store), streamed to the client as it arrives while its
 * SHA-256 and size are checked, and stored only if both match: the store's `put` publishes only a
 * body that ended cleanly, and the check errors the body before its end otherwise, so neither the
 * store nor the client is left with a wrong object under its name (the client's answer breaks off).
 *
 * Across processes (the Worker's isolates: `LfsState.claims`) a fill is announced in the store; a
 * process that misses an object another is filling waits for it to be published. The store has
 * no conditional create, so two that miss at the same moment both fetch it; both writes are the
 * same verified bytes (the later replaces the earlier atomically).
 */
import { sha256 } from "@noble/hashes/sha2.js";
import type { ProxyContext } from "../core/context.ts";
import { type ObjectInfo, putBytes } from "../../storage/store.ts";
import type { Sha256Stream } from "../core/deps.ts";
import { resolveRepo } from "../core/repo.ts";
import { edgeHttpError } from "../core/errors.ts";
import { callOrigin } from "../origin/origin.ts";
import { signedRequest, text } from "../downloads/pack_routes.ts";
import { rangedResponse } from "../downloads/ranged.ts";
import { recordOutcome } from "../core/request_record.ts";
import { LfsGrants, type OriginAction } from "./lfs_grants.ts";
import type { LfsEvictionHooks } from "../ops/store_eviction.ts";
import {
  BatchAnswerError,
  grantedObjects,
  lfsEndpoint,
  lfsForwardHeaders,
  MAX_BATCH_ANSWER_BYTES,
  originBatch,
  readBounded,
} from "./lfs_origin.ts";
import { callerTag, lfsObjectKey, type LfsUrlVerdict, verifyLfsUrl } from "./lfs_urls.ts";

type Granted = Extract<LfsUrlVerdict, { ok: true }>;

/**
 * Per process (or Worker isolate): grants, fills under way, the objects URLs pin and when each
 * object was last used (for eviction), and the hit counts of the operator's page.
 */
export class LfsState implements LfsEvictionHooks {
  readonly grants: LfsGrants;
  /** Fills under way, by oid: resolve to whether the object was stored. */
  readonly fills = new Map<string, Promise<boolean>>();
  readonly #pins = new Map<string, number>();
  readonly #used = new Map<string, number>();
  /** Downloads served from the store, and filled from the origin, by this process. */
  hits = 0;
  misses = 0;

  /**
   * `claims`: fills are also announced in the store (`lfs/claims/<oid>`), so other processes (the
   * Worker's isolates) missing the same object wait for it instead of fetching it again.
   */
  constructor(readonly maxEntries = 20_000, readonly claims = false) {
    this.grants = new LfsGrants(maxEntries);
  }

  /** A URL for `oid` valid until `until` (ms) was handed out: eviction spares it until then. */
  pin(oid: string, until: number): void {
    const was = this.#pins.get(oid) ?? 0;
    this.#pins.delete(oid);
    this.#pins.set(oid, Math.max(was, until));
    while (this.#pins.size > this.maxEntries) this.#pins.delete(this.#pins.keys().next().value!);
  }

  /** Until when (ms) a handed-out URL pins `oid` in this process; 0: none. */
  pinnedUntil(oid: string): number {
    return this.#pins.get(oid) ?? 0;
  }

  /** `oid` was served or filled at `now` (ms). */
  use(oid: string, now: number): void {
    this.#used.delete(oid);
    this.#used.set(oid, now);
    while (this.#used.size > this.maxEntries) this.#used.delete(this.#used.keys().next().value!);
  }

  lastUsed(oid: string): number {
    return this.#used.get(oid) ?? 0;
  }
}

/** How long a request waits for another's fill of the same object before filling itself. */
const JOIN_MS = 120_000;

export async function handleLfsObjectGet(
  ctx: ProxyContext,
  lfs: LfsState,
  request: Request,
  id: string,
  oid: string,
): Promise<Response> {
  const checked = await signedRequest(ctx, request, id, oid, verifyLfsUrl);
  if (checked instanceof Response) return checked;
  const { verdict, now } = checked;
  const key = lfsObjectKey(oid);
  // A fill under way in this process is joined: wait for it, then serve from the store. Between
  // finding none and claiming the fill below nothing awaits, so one request per process fills.
  let info = await ctx.deps.store.head(key);
  for (let joined = 0; !info && request.method !== "HEAD" && joined < 2; joined++) {
    const running = lfs.fills.get(oid);
    if (!running) break;
    await withTimeout(running, JOIN_MS);
    info = await ctx.deps.store.head(key);
  }
  const headers = new Headers({
    "content-type": "application/octet-stream",
    "accept-ranges": "bytes",
    "etag": `"${oid}"`,
    "cache-control": `private, max-age=${Math.max(0, verdict.expires - now)}, immutable`,
  });
  if (info) {
    if (info.size !== verdict.size) {
      return text(502, `the origin gave object ${oid} a size its content does not have`);
    }
    recordOutcome(ctx, { action: "lfs-hit" });
    lfs.hits++;
    lfs.use(oid, ctx.deps.clock.now());
    return await fromStore(ctx, request, oid, info.size, verdict.expires - now, (n) => {
      ctx.metrics.inc("gitedge_lfs_bytes_total", n, { source: "store" });
    });
  }
  if (request.method === "HEAD") {
    headers.set("content-length", String(verdict.size));
    return new Response(null, { status: 200, headers });
  }
  let settle!: (stored: boolean) => void;
  const flight = new Promise<boolean>((resolve) => settle = resolve);
  lfs.fills.set(oid, flight);
  const done = (stored: boolean) => {
    settle(stored);
    if (lfs.fills.get(oid) === flight) lfs.fills.delete(oid);
  };
  try {
    if (lfs.claims) {
      const filled = await otherProcessFill(ctx, oid, key);
      if (filled) {
        done(true);
        if (filled.size !== verdict.size) {
          return text(502, `the origin gave object ${oid} a size its content does not have`);
        }
        recordOutcome(ctx, { action: "lfs-hit" });
        lfs.hits++;
        return await fromStore(ctx, request, oid, filled.size, verdict.expires - now);
      }
      const claim = `${CLAIM_PREFIX}${oid}`;
      const claimed = putBytes(ctx.deps.store, claim, new TextEncoder().encode("{}")).catch(
        () => {},
      );
      const released = lfs.fills.get(oid)!.then(() => claimed).then(() =>
        ctx.deps.store.delete(claim)
      )
        .catch(() => {});
      ctx.deps.waitUntil?.(released);
    }
    return await fill(ctx, lfs, request, verdict, headers, done);
  } catch (error) {
    done(false);
    throw error;
  }
}

/** Where fills under way are announced across processes (`LfsState.claims`). */
export const CLAIM_PREFIX = "lfs/claims/";
/** A claim older than this is taken for one whose process died. */
const CLAIM_FRESH_MS = 60_000;
/** The longest a request waits on another process's fill before filling itself. */
const CLAIM_WAIT_MS = 30_000;

/**
 * Waits for another process's fill of `oid` if one is announced: the stored object once it is
 * published, or null when there is no fresh claim, the claimant gave up, or it takes too long.
 * Not atomic (the store has no conditional create): two processes that look at once both fill,
 * as without claims.
 */
async function otherProcessFill(
  ctx: ProxyContext,
  oid: string,
  key: string,
): Promise<ObjectInfo | null> {
  const store = ctx.deps.store;
  const claim = await store.head(`${CLAIM_PREFIX}${oid}`);
  if (!claim || Date.now() - claim.modified > CLAIM_FRESH_MS) return null;
  const started = Date.now();
  for (let wait = 25;; wait = Math.min(wait * 2, 400)) {
    await new Promise((resolve) => setTimeout(resolve, wait));
    const info = await store.head(key);
    if (info) return info;
    if (Date.now() - started > CLAIM_WAIT_MS) return null;
    if (!await store.head(`${CLAIM_PREFIX}${oid}`)) return await store.head(key);
  }
}

async function withTimeout(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    p.catch(() => {}),
    new Promise<void>((resolve) => timer = setTimeout(resolve, ms)),
  ]);
  clearTimeout(timer);
}

/** Fetches the object from the origin, streams it to the client and stores it if it checks out. */
async function fill(
  ctx: ProxyContext,
  lfs: LfsState,
  request: Request,
  verdict: Granted,
  headers: Headers,
  /** Called once with whether the object was stored (the fill's end, failed or not). */
  done: (stored: boolean) => void,
): Promise<Response> {
  const { oid, size } = verdict;
  const failed = (response: Response) => {
    done(false);
    return response;
  };
  const action = lfs.grants.get(
    LfsGrants.key(verdict.repoId, oid, verdict.tag),
    ctx.deps.clock.now(),
  ) ?? await askAgain(ctx, request, verdict);
  if (action instanceof Response) return failed(action);
  let res: Response;
  try {
    res = await callOrigin(ctx.deps.originFetch, action.href, {
      method: "GET",
      headers: action.header,
    });
  } catch (error) {
    const known = edgeHttpError(error);
    if (!known) throw error;
    ctx.deps.log?.log("warn", "lfs.fill.failed", { oid, detail: known.message });
    return failed(text(502, `the origin's LFS download of ${oid} failed`));
  }
  if (res.status !== 200 || !res.body) {
    await res.body?.cancel().catch(() => {});
    recordOutcome(ctx, { action: "lfs-origin-error" });
    const status = res.status >= 400 && res.status < 600 ? res.status : 502;
    return failed(
      text(status, `the origin answered ${res.status} to the download of LFS object ${oid}`),
    );
  }
  const declared = res.headers.get("content-length");
  if (declared !== null && Number(declared) !== size) {
    await res.body.cancel().catch(() => {});
    recordOutcome(ctx, { action: "lfs-origin-error" });
    return failed(text(502, `the origin's download of ${oid} has ${declared} bytes, not ${size}`));
  }
  recordOutcome(ctx, { action: "lfs-miss" });
  lfs.misses++;
  lfs.use(oid, ctx.deps.clock.now());
  const checkedBody = res.body.pipeThrough(verifying(ctx, oid, size));
  const [toClient, toStore] = checkedBody.tee();
  const stored = ctx.deps.store.put(lfsObjectKey(oid), toStore).then(
    () => true,
    (error) => {
      ctx.deps.log?.log("warn", "lfs.fill.refused", {
        oid,
        detail: error instanceof Error ? error.message : String(error),
      });
      return false;
    },
  );
  const finished = stored.then(done);
  ctx.deps.waitUntil?.(finished);
  headers.set("content-length", String(size));
  return new Response(toClient, { status: 200, headers });
}

/** The origin's object did not match its oid or size. */
export class LfsContentError extends Error {
  override name = "LfsContentError";
}

/**
 * Passes bytes on while hashing and counting them; errors the stream (so nothing is published
 * and the client's answer breaks off) if it runs past `size`, or ends short of it or with another
 * SHA-256 than `oid`. The last chunk is held back until the check passes, so a client reading an
 * answer of declared length never gets all of a wrong object.
 */
function verifying(
  ctx: ProxyContext,
  oid: string,
  size: number,
): TransformStream<Uint8Array, Uint8Array> {
  const hash = ctx.deps.sha256?.() ?? jsSha256();
  let seen = 0;
  let held: Uint8Array | null = null;
  return new TransformStream({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (seen > size) throw new LfsContentError(`LFS object ${oid} is longer than ${size} bytes`);
      hash.update(chunk);
      ctx.metrics.inc("gitedge_lfs_bytes_total", chunk.byteLength, { source: "origin" });
      if (held) controller.enqueue(held);
      held = chunk;
    },
    async flush(controller) {
      if (seen !== size) {
        throw new LfsContentError(`LFS object ${oid} ended after ${seen} of ${size} bytes`);
      }
      const digest = Array.from(await hash.digest(), (b) => b.toString(16).padStart(2, "0"))
        .join("");
      if (digest !== oid) throw new LfsContentError(`LFS object ${oid} has SHA-256 ${digest}`);
      if (held) controller.enqueue(held);
    },
  });
}

/** The pure-JavaScript SHA-256, where the runtime gave none. */
function jsSha256(): Sha256Stream {
  const hash = sha256.create();
  return {
    update: (chunk) => void hash.update(chunk),
    digest: () => Promise.resolve(hash.digest()),
  };
}

/**
 * No grant in memory (another process handed out the URL, or it was forgotten): ask the origin's
 * batch API again for this one object with the credential the request carries, which must be the
 * one the URL was granted to. The origin's refusal reaches the caller as it is.
 */
async function askAgain(
  ctx: ProxyContext,
  request: Request,
  verdict: Granted,
): Promise<OriginAction | Response> {
  const authorization = request.headers.get("authorization");
  if (await callerTag(ctx.signer, authorization) !== verdict.tag) {
    return text(403, "this LFS URL was granted to another caller");
  }
  const repo = resolveRepo(verdict.repoPath, ctx.deps.config);
  if (repo.id !== verdict.repoId) return text(403, "LFS URL names another repository");
  const asked = [{ oid: verdict.oid, size: verdict.size }];
  const body = new TextEncoder().encode(
    JSON.stringify({ operation: "download", transfers: ["basic"], objects: asked }),
  );
  const headers = lfsForwardHeaders(new Headers());
  if (authorization !== null) headers.set("authorization", authorization);
  ctx.metrics.inc("gitedge_lfs_batches_total", 1, { op: "refill" });
  const res = await originBatch(ctx, repo, headers, body);
  if (res.status !== 200) {
    await res.body?.cancel().catch(() => {});
    return text(
      res.status >= 400 && res.status < 600 ? res.status : 502,
      `the origin answered ${res.status} to the LFS batch`,
    );
  }
  const bytes = await readBounded(res.body, MAX_BATCH_ANSWER_BYTES);
  try {
    if (!bytes) throw new BatchAnswerError("its batch answer is too large");
    const { granted, answer } = grantedObjects(
      JSON.parse(new TextDecoder().decode(bytes)),
      asked,
      lfsEndpoint(ctx, repo),
    );
    if (granted.length === 0) {
      const error = (answer.objects as Record<string, unknown>[])[0]?.error as
        | { code?: unknown }
        | undefined;
      const code = typeof error?.code === "number" && error.code >= 400 && error.code < 600
        ? error.code
        : 404;
      return text(code, `the origin no longer grants LFS object ${verdict.oid}`);
    }
    return granted[0].object;
  } catch (error) {
    if (!(error instanceof BatchAnswerError) && !(error instanceof SyntaxError)) throw error;
    return text(502, "the origin's LFS server answered garbage");
  }
}

/** A stored LFS object as a ranged response (Range, If-Range, its oid as ETag, immutable). */
function fromStore(
  ctx: ProxyContext,
  request: Request,
  oid: string,
  size: number,
  maxAgeSeconds: number,
  served?: (bytes: number) => void,
): Promise<Response> {
  return rangedResponse(request, {
    size,
    contentType: "application/octet-stream",
    etag: `"${oid}"`,
    maxAgeSeconds,
    ranges: true,
    emptyResumeAtEnd: true,
    open: async (range) => (await ctx.deps.store.get(lfsObjectKey(oid), range))?.body ?? null,
    gone: "LFS object not found",
    served,
  });
}
