/**
 * The smart-HTTP routes: capability advertisement, upload-pack (with the fetch rewrite) and
 * receive-pack. Everything streams; only a protocol-v2 command request (capped in size) and a v2
 * capability advertisement (a few lines) are read whole.
 */
import { DEFAULT_EDGE_CONFIG } from "./deps.ts";
import type { Manifest, RepoRef, ScheduleBasis } from "./deps.ts";
import type { ProxyContext } from "./context.ts";
import { countingStream } from "./metrics.ts";
import { cacheKey, entryKey, hex } from "./response_cache.ts";
import { prefixed } from "./streams.ts";
import { sha256 } from "@noble/hashes/sha2.js";
import { signedPackUrl } from "./pack_urls.ts";
import {
  authOf,
  callOrigin,
  FORWARDED_RESPONSE_HEADERS,
  forwardHeaders,
  OriginStatusError,
} from "./origin.ts";
import { injectBeforePackfile } from "./rewrite.ts";
import { manifestPacks } from "./snapshot.ts";
import { NO_SNAPSHOT, planFetch, wantsSnapshot } from "./fetch_plan.ts";
import { ClientRequestError, RequestTooLargeError } from "./errors.ts";
import {
  concat,
  encodePkt,
  FLUSH_PKT,
  type Pkt,
  pktBytes,
  PktLineReader,
  pktText,
} from "../git/pktline.ts";
import { sha1 } from "@noble/hashes/legacy.js";
import {
  readCapabilityAdvertisement,
  serializeCapabilityAdvertisement,
  withFetchFeature,
} from "../git/capabilities.ts";
import {
  type CommandRequest,
  parseCommandRequest,
  readCommandRequest,
  requestCommand,
  serializeCommandRequest,
} from "../git/command_request.ts";
import { type FetchArgs, parseFetchArgs, serializeFetchArgs } from "../git/fetch_request.ts";
import { encodeFetchSection } from "../git/fetch_response.ts";
import { formatPackfileUriLine } from "../git/packfile_uris.ts";

function isV2(request: Request): boolean {
  return (request.headers.get("git-protocol") ?? "").split(":").includes("version=2");
}

/** A response to the client carrying the origin's status, chosen headers and `body`. */
function relay(
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
async function fromOrigin(ctx: ProxyContext, url: string, init: RequestInit): Promise<Response> {
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
 * Records the origin's answer to an upload-pack-service request: a 200 renews the memo of the
 * request's credential for this repository, a 401/403 drops it.
 */
function noteOriginVerdict(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  status: number,
): void {
  const key = credentialKey(ctx, request, repo);
  if (status === 200) ctx.authMemo.remember(key, ctx.deps.clock.now());
  else if (status === 401 || status === 403) ctx.authMemo.forget(key);
}

/** Whether the origin accepted `request`'s credential for `repo` within the configured TTL. */
function recentlyAuthorised(ctx: ProxyContext, request: Request, repo: RepoRef): boolean {
  const ttl = ctx.deps.config.authTtlSeconds ?? DEFAULT_EDGE_CONFIG.authTtlSeconds;
  if (ttl <= 0) return false;
  return ctx.authMemo.accepted(credentialKey(ctx, request, repo), ctx.deps.clock.now(), ttl * 1000);
}

/** `GET <repo>/info/refs?service=…`: v2 advertisements gain `packfile-uris`; others pass through. */
export async function handleInfoRefs(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  url: URL,
): Promise<Response> {
  const origin = await fromOrigin(ctx, `${repo.originUrl}/info/refs${url.search}`, {
    method: "GET",
    headers: forwardHeaders(request.headers),
  });
  const service = url.searchParams.get("service");
  // Refusals drop a memo; acceptance is noted from upload-pack requests only (an origin may
  // advertise refs to anyone and still guard fetches).
  if (service === "git-upload-pack" && origin.status !== 200) {
    noteOriginVerdict(ctx, request, repo, origin.status);
  }
  if (
    origin.status !== 200 || service !== "git-upload-pack" || !isV2(request) || !origin.body
  ) {
    return relay(origin, origin.body);
  }
  const reader = new PktLineReader(origin.body);
  const first = await reader.peek();
  const isVersion2 = first?.type === "data" &&
    new TextDecoder().decode(first.data).replace(/\n$/, "") === "version 2";
  if (!isVersion2) return relay(origin, reader.remainder());
  const originAdv = await readCapabilityAdvertisement(reader);
  ctx.originFeatures?.remember(
    repo,
    (originAdv.capabilities.find((c) => c.key === "fetch")?.value ?? "").split(" "),
  );
  const adv = withFetchFeature(originAdv, "packfile-uris");
  const out = serializeCapabilityAdvertisement(adv);
  return relay(origin, new Blob([out as Uint8Array<ArrayBuffer>]).stream(), {
    "cache-control": "no-cache",
  });
}

/** A request body being read for parsing. */
interface GuardedBody {
  stream: ReadableStream<Uint8Array>;
  /** The rest streams through to the origin: no cap, budget or timeout from here on. */
  passThrough(): void;
  /** Returns its bytes to the parse budget. */
  release(): void;
}

/**
 * The client's request body, gunzipped if need be, failing with a `ClientRequestError` past
 * `maxRequestBytes` (413), when the parse budget is spent (503), when it has not arrived whole
 * within the body timeout (408), or when it is not valid gzip (400, also after `passThrough`).
 */
function requestBody(ctx: ProxyContext, request: Request): GuardedBody {
  const max = ctx.deps.config.maxRequestBytes;
  let body: ReadableStream<Uint8Array> = request.body ?? new Blob([]).stream();
  const enc = (request.headers.get("content-encoding") ?? "").toLowerCase();
  const gzip = enc === "gzip" || enc === "x-gzip";
  if (gzip) {
    body = body.pipeThrough(
      new DecompressionStream("gzip") as unknown as TransformStream<Uint8Array, Uint8Array>,
    );
  } else if (enc && enc !== "identity") {
    throw new ClientRequestError(`unsupported content-encoding ${enc}`, 415);
  }
  const seconds = ctx.deps.config.bodyTimeoutSeconds ?? DEFAULT_EDGE_CONFIG.bodyTimeoutSeconds;
  const budget = ctx.parseBudget;
  const reader = body.getReader();
  let taken = 0;
  let guarded = true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ClientRequestError(`request body not received within ${seconds} s`, 408)),
      seconds * 1000,
    );
  });
  expired.catch(() => {});
  const refusal = (error: unknown): unknown => {
    clearTimeout(timer);
    reader.cancel().catch(() => {});
    if (!(error instanceof ClientRequestError) && gzip) {
      const detail = error instanceof Error ? error.message : String(error);
      error = new ClientRequestError(`request body is not valid gzip: ${detail}`, 400);
    }
    if (error instanceof ClientRequestError) {
      ctx.metrics.inc("gitedge_requests_refused_total", 1, { status: String(error.status) });
    }
    return error;
  };
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await (guarded ? Promise.race([reader.read(), expired]) : reader.read());
        if (next.done) {
          clearTimeout(timer);
          controller.close();
          return;
        }
        const n = next.value.byteLength;
        if (!guarded) {
          controller.enqueue(next.value);
          return;
        }
        if (taken + n > max) throw new RequestTooLargeError(`request body exceeds ${max} bytes`);
        if (!budget.take(n)) {
          throw new ClientRequestError(
            "the edge is parsing too many large requests at once; retry shortly",
            503,
          );
        }
        taken += n;
        controller.enqueue(next.value);
      } catch (error) {
        controller.error(refusal(error));
      }
    },
    cancel(reason) {
      clearTimeout(timer);
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
  const release = () => {
    clearTimeout(timer);
    budget.give(taken);
    taken = 0;
  };
  return {
    stream,
    passThrough: () => {
      guarded = false;
      release();
    },
    release,
  };
}

/**
 * Reads packets up to and including the next delimiter or flush (`toFlush`: the next flush),
 * erroring once `budget.left` bytes are used up.
 */
async function readPkts(
  reader: PktLineReader,
  budget: { left: number; max: number },
  toFlush: boolean,
): Promise<Pkt[]> {
  const pkts: Pkt[] = [];
  for (;;) {
    const pkt = await reader.read();
    if (pkt === null) return pkts;
    budget.left -= pkt.type === "data" ? pkt.data.length + 4 : 4;
    if (budget.left < 0) throw new RequestTooLargeError(`request body exceeds ${budget.max} bytes`);
    pkts.push(pkt);
    if (pkt.type === "flush" || (pkt.type === "delim" && !toFlush)) return pkts;
  }
}

/**
 * Streams a request through to the origin unchanged (v0/v1 upload-pack, receive-pack, v2
 * commands the edge does not act on). The body is never held, so no size cap applies here: a
 * large push is the origin's to accept or refuse. `body` replaces the request's own (already
 * decoded: no content-encoding goes with it).
 */
async function streamThrough(
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

export async function handleReceivePack(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
): Promise<Response> {
  return await streamThrough(ctx, request, `${repo.originUrl}/git-receive-pack`);
}

/**
 * Runs `work` off the client's critical path: kept alive by the runtime's `waitUntil` where there
 * is one; a failure is logged, since no client waits for it.
 */
function inBackground(ctx: ProxyContext, work: Promise<unknown>): void {
  const logged = work.catch((err) => console.error("gitedge: background work failed:", err));
  ctx.deps.waitUntil?.(logged);
}

/** A request's bytes less its argument lines (after the delimiter) with `keyword`. */
function withoutArg(request: Uint8Array, keyword: string): Uint8Array {
  const kept: Uint8Array[] = [];
  let args = false;
  let from = 0;
  forEachPkt(request, (at, end, type) => {
    if (type === "delim") args = true;
    if (!args || type !== "data") return;
    const line = pktText({ type: "data", data: request.subarray(at + 4, end) });
    if (line === keyword || line.startsWith(`${keyword} `)) {
      kept.push(request.subarray(from, at));
      from = end;
    }
  });
  kept.push(request.subarray(from));
  return kept.length === 1 ? request : concat(kept);
}

/** Calls `fn` with the offsets and kind of each packet of `bytes` (already parsed: well formed). */
function forEachPkt(
  bytes: Uint8Array,
  fn: (at: number, end: number, type: "data" | "flush" | "delim" | "other") => void,
): void {
  const hex = new TextDecoder();
  for (let at = 0; at + 4 <= bytes.length;) {
    const length = parseInt(hex.decode(bytes.subarray(at, at + 4)), 16);
    const end = length < 4 ? at + 4 : at + length;
    fn(at, end, length >= 4 ? "data" : length === 0 ? "flush" : length === 1 ? "delim" : "other");
    at = end;
  }
}

/** `bytes` up to the end of the command request they start with (its flush). */
function firstRequest(bytes: Uint8Array): Uint8Array {
  let end = bytes.length;
  let found = false;
  forEachPkt(bytes, (_at, pktEnd, type) => {
    if (!found && type === "flush") {
      end = pktEnd;
      found = true;
    }
  });
  return bytes.subarray(0, end);
}

/** `stream`, with each chunk also appended to `chunks` as it passes. */
function recorded(
  stream: ReadableStream<Uint8Array>,
  chunks: Uint8Array[],
): ReadableStream<Uint8Array> {
  return stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        chunks.push(chunk);
        controller.enqueue(chunk);
      },
    }),
  );
}

/**
 * Looks at the start of an upload-pack answer: `served` when the origin said 200 and began with
 * something other than an `ERR` packet (or nothing at all). `body` is the whole answer still.
 */
async function peekAnswer(
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

/**
 * `POST <repo>/git-upload-pack`. Protocol v2 `fetch` requests are read (capped) and may be
 * rewritten; every other command (ls-refs, bundle-uri, object-info, commands to come) and v0/v1
 * streams through as the client sent it.
 */
export async function handleUploadPack(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  url: URL,
): Promise<Response> {
  const originUrl = `${repo.originUrl}/git-upload-pack`;
  if (!isV2(request)) return await streamThrough(ctx, request, originUrl);

  const body = requestBody(ctx, request);
  try {
    return await uploadPack(ctx, request, repo, url, body);
  } finally {
    body.release();
  }
}

async function uploadPack(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  url: URL,
  guarded: GuardedBody,
): Promise<Response> {
  const originUrl = `${repo.originUrl}/git-upload-pack`;
  const max = ctx.deps.config.maxRequestBytes;
  const reader = new PktLineReader(guarded.stream);
  const budget = { left: max, max };
  let req: CommandRequest;
  // The request as the client sent it (forwarded byte for byte when nothing is rewritten).
  let sent: Uint8Array;
  try {
    // The command and capability lines, in whatever order the client wrote them.
    const head = await readPkts(reader, budget, false);
    if (head.length === 0) throw new ClientRequestError("empty request", 400);
    const { command } = requestCommand(head);
    if (command !== "fetch") {
      guarded.passThrough();
      const rest = prefixed(concat(head.map(pktBytes)), reader.remainder());
      const res = await streamThrough(ctx, request, originUrl, rest);
      noteOriginVerdict(ctx, request, repo, res.status);
      return res;
    }
    if (Number(request.headers.get("content-length") ?? 0) > max) {
      throw new RequestTooLargeError(`request body exceeds ${max} bytes`);
    }
    const headBytes = concat(head.map(pktBytes));
    if (head.at(-1)?.type === "flush") {
      req = parseCommandRequest(head);
      sent = headBytes;
    } else {
      // The arguments (a million `want` lines, maybe) are kept as they came and as text lines,
      // never as a packet object per line.
      const chunks: Uint8Array[] = [headBytes];
      const rest = new PktLineReader(prefixed(headBytes, recorded(reader.remainder(), chunks)));
      try {
        req = (await readCommandRequest(rest))!;
      } finally {
        await rest.cancel().catch(() => {});
      }
      sent = firstRequest(concat(chunks));
    }
  } finally {
    // Whatever is left of the body (all of it after an error) is not needed.
    await reader.cancel().catch(() => {});
  }
  const args = parseFetchArgs(req.args);
  const scheme = new URL(publicBase(ctx, url)).protocol.replace(":", "");
  const eligible = wantsSnapshot(args, scheme);
  const plan = planFetch({
    req,
    args,
    scheme,
    snapshot: eligible ? await currentSnapshot(ctx, repo) : NO_SNAPSHOT,
    originAdvertisesUris: ctx.originFeatures?.advertises(repo, "packfile-uris") ?? false,
    recentlyAuthorised: eligible && recentlyAuthorised(ctx, request, repo),
    responseCacheOn: responseCacheBytes(ctx) > 0,
  });
  if (plan.passthrough !== null) {
    ctx.metrics.inc("gitedge_fetch_passthrough_total", 1, { reason: plan.passthrough });
  }
  switch (plan.action) {
    case "answer-from-snapshot":
      return await answerFromSnapshot(ctx, repo, plan.manifest, url, args.sidebandAll);
    case "response-cache":
      return await cachedFetch(ctx, request, repo, plan.originReq, plan.originArgs, plan.build);
  }
  // To the origin: the rewritten request, or the bytes the client sent (less `packfile-uris`
  // unless the origin advertised it).
  const body = plan.action === "rewrite"
    ? serializeCommandRequest({ ...req, args: serializeFetchArgs(plan.originArgs) })
    : plan.stripUris
    ? withoutArg(sent, "packfile-uris")
    : sent;
  const origin = await fromOrigin(ctx, originUrl, {
    method: "POST",
    headers: forwardHeaders(request.headers),
    body: body as Uint8Array<ArrayBuffer>,
  });
  noteOriginVerdict(ctx, request, repo, origin.status);
  // Only a request the origin authorised and answered (an unknown `want` gets `ERR`) starts a
  // build (with its credentials, in memory).
  const answer = await peekAnswer(origin);
  if (plan.build && answer.served) {
    inBackground(ctx, ctx.deps.coordinator.schedule(repo, authOf(request.headers), plan.build));
  }
  if (plan.action !== "rewrite" || !answer.served || !answer.body) {
    return relay(origin, answer.body);
  }
  const section = await packfileUrisSection(ctx, repo, plan.manifest, url, args.sidebandAll);
  ctx.metrics.inc("gitedge_fetch_rewrites_total");
  ctx.metrics.inc("gitedge_packfile_uris_total", manifestPacks(plan.manifest).length);
  return relay(
    origin,
    injectBeforePackfile(answer.body, section, { sidebandAll: args.sidebandAll }),
  );
}

function responseCacheBytes(ctx: ProxyContext): number {
  return ctx.deps.config.responseCacheBytes ?? DEFAULT_EDGE_CONFIG.responseCacheBytes;
}

const RESULT_TYPE = "application/x-git-upload-pack-result";

/**
 * A fetch without `have` lines, through the response cache (see `response_cache.ts`). A stored
 * answer goes only to a client the origin just authorised: with `include-tag`, by the ls-refs
 * of tags the key needs anyway; without, by the credential memo. Anyone else's request goes to
 * the origin, whose answer may fill the cache.
 */
async function cachedFetch(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  req: CommandRequest,
  args: FetchArgs,
  build: ScheduleBasis | null,
): Promise<Response> {
  // Only a request the origin authorised starts a build (with its credentials, in memory).
  const authorisedBuild = () => {
    if (build) {
      inBackground(ctx, ctx.deps.coordinator.schedule(repo, authOf(request.headers), build));
    }
  };
  let tags = "-";
  let authorised: boolean;
  if (args.includeTag) {
    const digest = await originTagDigest(ctx, request, repo, req);
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
  if (authorised) authorisedBuild();
  if (authorised) {
    const hit = await cachedAnswer(ctx, storeKey);
    if (hit) {
      authorisedBuild();
      return hit;
    }
    const pending = ctx.responseCache.pending(storeKey);
    if (pending && await pending) {
      const filled = await cachedAnswer(ctx, storeKey);
      if (filled) {
        authorisedBuild();
        return filled;
      }
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
      authorisedBuild();
    }
    await ctx.responseCache.pending(storeKey);
    const filled = await cachedAnswer(ctx, storeKey);
    if (filled) return filled;
    claim = ctx.responseCache.claim(storeKey);
  }
  if (claim && authorised) {
    // A fill may have landed between this request's lookup and its claim.
    const landed = await cachedAnswer(ctx, storeKey);
    if (landed) {
      claim.abandon();
      return landed;
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
  // An answer that is an `ERR` (an unknown `want`) starts no build and is not kept.
  const answer = await peekAnswer(origin);
  if (answer.served) authorisedBuild();
  const typeOk = origin.headers.get("content-type") === RESULT_TYPE;
  if (!claim || !answer.served || !typeOk || !answer.body) {
    claim?.abandon();
    return relay(origin, answer.body);
  }
  const [toClient, toStore] = answer.body.tee();
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
    headers: { "content-type": RESULT_TYPE, "cache-control": "no-cache" },
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
  if (res.status !== 200 || !res.body) {
    await res.body?.cancel();
    return null;
  }
  const hash = sha256.create();
  let size = 0;
  try {
    for await (const chunk of res.body) {
      size += chunk.byteLength;
      if (size > MAX_TAG_LISTING) {
        throw new OriginStatusError(repo.originUrl, 200, "tag list too large");
      }
      hash.update(chunk);
    }
  } catch (err) {
    // An answer the origin cut short (its upload-pack died on the request) is the origin's
    // failure, a 502, not the edge's.
    if (err instanceof OriginStatusError) throw err;
    throw new OriginStatusError(repo.originUrl, 200, "its answer was cut short");
  }
  return hex(hash.digest());
}

/** POSTs `body` to the origin's upload-pack with the client's headers; notes the verdict. */
async function forwardUploadPack(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  body: Uint8Array,
): Promise<Response> {
  const origin = await fromOrigin(ctx, `${repo.originUrl}/git-upload-pack`, {
    method: "POST",
    headers: forwardHeaders(request.headers),
    body: body as Uint8Array<ArrayBuffer>,
  });
  noteOriginVerdict(ctx, request, repo, origin.status);
  return origin;
}

/** SHA-1 of the 12-byte header of an empty version-2 pack, i.e. an empty pack's trailer. */
const EMPTY_PACK = (() => {
  const header = new Uint8Array([0x50, 0x41, 0x43, 0x4b, 0, 0, 0, 2, 0, 0, 0, 0]);
  const pack = new Uint8Array(32);
  pack.set(header);
  pack.set(sha1(header), 12);
  return pack;
})();

/**
 * The edge's own answer to a fetch whose wants are all snapshot tips: the `packfile-uris` section
 * and an empty pack (band 1), in the order upload-pack writes a response to `done`; section
 * headers are banded too under `sideband-all`. The origin does no pack work at all.
 */
async function answerFromSnapshot(
  ctx: ProxyContext,
  repo: RepoRef,
  manifest: Manifest,
  url: URL,
  sidebandAll: boolean,
): Promise<Response> {
  const section = await packfileUrisSection(ctx, repo, manifest, url, sidebandAll);
  const banded = new Uint8Array(EMPTY_PACK.length + 1);
  banded[0] = 1;
  banded.set(EMPTY_PACK, 1);
  const body = concat([
    section,
    encodeFetchSection("packfile", [], sidebandAll),
    encodePkt(banded),
    FLUSH_PKT,
  ]);
  ctx.metrics.inc("gitedge_fetch_answered_total");
  ctx.metrics.inc("gitedge_packfile_uris_total", manifestPacks(manifest).length);
  return new Response(body as Uint8Array<ArrayBuffer>, {
    status: 200,
    headers: {
      "content-type": "application/x-git-upload-pack-result",
      "cache-control": "no-cache",
    },
  });
}

/** The snapshot in force, and whether one of its packs is missing from the store (or truncated). */
async function currentSnapshot(
  ctx: ProxyContext,
  repo: RepoRef,
): Promise<{ manifest: Manifest | null; missingPack: boolean }> {
  const manifest = await ctx.deps.coordinator.manifest(repo);
  if (!manifest) return { manifest, missingPack: false };
  const packs = manifestPacks(manifest);
  const present = await Promise.all(packs.map((p) => ctx.deps.store.head(p.key)));
  // Missing, truncated, or rewritten since it was published (a flipped byte keeps the size but
  // not the store's version): never handed out again; the snapshot is rebuilt.
  const missingPack = present.some((info, i) =>
    info === null || info.size !== packs[i].size ||
    (packs[i].version !== undefined && info.version !== packs[i].version)
  );
  if (missingPack) ctx.metrics.inc("gitedge_snapshot_missing_packs_total");
  return { manifest, missingPack };
}

function publicBase(ctx: ProxyContext, url: URL): string {
  return (ctx.deps.config.publicUrl ?? url.origin).replace(/\/+$/, "");
}

async function packfileUrisSection(
  ctx: ProxyContext,
  repo: RepoRef,
  manifest: Manifest,
  url: URL,
  sidebandAll: boolean,
): Promise<Uint8Array> {
  const base = publicBase(ctx, url);
  const lines: string[] = [];
  const now = Math.floor(ctx.deps.clock.now() / 1000);
  const ttl = ctx.deps.config.urlTtlSeconds;
  for (const pack of manifestPacks(manifest)) {
    const uri = await signedPackUrl(ctx.signer, base, repo.id, pack.key, now, ttl);
    lines.push(formatPackfileUriLine(pack.hash, uri));
  }
  return encodeFetchSection("packfile-uris", lines, sidebandAll);
}
