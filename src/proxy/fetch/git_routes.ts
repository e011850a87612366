/**
 * The smart-HTTP routes: capability advertisement, upload-pack (with the fetch rewrite) and
 * receive-pack. Everything streams; only a protocol-v2 command request (capped in size) and a v2
 * capability advertisement (a few lines) are read whole. What a fetch gets is decided by
 * `planFetch` (fetch_plan.ts); this file gathers its inputs and does the I/O.
 */
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import type { EvictionEpoch } from "../ops/repo_registry.ts";
import { recordOutcome } from "../core/request_record.ts";
import { forwardHeaders, readingOrigin } from "../origin/origin.ts";
import { prefixed } from "../core/streams.ts";
import { expiryFor } from "../core/signing.ts";
import { NO_SNAPSHOT, planFetch, wantsSnapshot } from "./fetch_plan.ts";
import { classifyFetch } from "./eligibility.ts";
import { ClientRequestError, RequestTooLargeError } from "../core/errors.ts";
import {
  fromOrigin,
  noteOriginVerdict,
  recentlyAuthorised,
  relay,
  streamThrough,
} from "../origin/forwarding.ts";
import {
  firstRequest,
  type GuardedBody,
  readPkts,
  recorded,
  requestBody,
} from "../origin/request_body.ts";
import type { FetchCall } from "./fetch_call.ts";
import { answerFromSnapshot } from "./answered_fetch.ts";
import { currentSnapshot } from "../snapshots/current_snapshot.ts";
import { publicBase } from "../core/context.ts";
import { rewrittenFetch } from "./rewritten_fetch.ts";
import { cachedFetch, responseCacheBytes } from "./cached_fetch.ts";
import { forwardedFetch } from "./forwarded_fetch.ts";
import { mirrorFetch } from "./mirror_fetch.ts";
import { concat, pktBytes, PktLineReader } from "../../git/pktline.ts";
import {
  readCapabilityAdvertisement,
  serializeCapabilityAdvertisement,
  withFetchFeature,
} from "../../git/capabilities.ts";
import {
  type CommandRequest,
  parseCommandRequest,
  readCommandRequest,
  requestCommand,
} from "../../git/command_request.ts";
import { parseFetchArgs } from "../../git/fetch_request.ts";
import { streamedFetch } from "./streamed_fetch.ts";
import { authorisedToFetch } from "../origin/fetch_probe.ts";
import { listingSeen } from "./mirror_ahead.ts";
import { answerBundleUri, offersBundles, withCapability } from "../bundles/bundle_answer.ts";

function isV2(request: Request): boolean {
  return (request.headers.get("git-protocol") ?? "").split(":").includes("version=2");
}

/** `GET <repo>/info/refs?service=…`: v2 advertisements gain `packfile-uris`; others pass through. */
export async function handleInfoRefs(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  url: URL,
): Promise<Response> {
  const service = url.searchParams.get("service");
  if (service === "git-upload-pack" && isV2(request)) ctx.lsRefsAhead?.start(ctx, request, repo);
  const originUrl = `${repo.originUrl}/info/refs${url.search}`;
  const origin = await fromOrigin(ctx, originUrl, {
    method: "GET",
    headers: forwardHeaders(request.headers),
  });
  // Refusals drop a memo; acceptance is noted from fetches only (an origin may advertise and
  // list refs to anyone and still guard its objects).
  if (service === "git-upload-pack" && origin.status !== 200) {
    noteOriginVerdict(ctx, request, repo, origin.status);
  }
  if (
    origin.status !== 200 || service !== "git-upload-pack" || !isV2(request) || !origin.body
  ) {
    return relay(origin, origin.body);
  }
  const reader = new PktLineReader(origin.body);
  let originAdv;
  try {
    // Not pkt-lines, or not an advertisement: the origin's failure (502), not the client's.
    const first = await readingOrigin(originUrl, () => reader.peek());
    const isVersion2 = first?.type === "data" &&
      new TextDecoder().decode(first.data).replace(/\n$/, "") === "version 2";
    if (!isVersion2) return relay(origin, reader.remainder());
    originAdv = await readingOrigin(originUrl, () => readCapabilityAdvertisement(reader));
  } catch (error) {
    await reader.cancel().catch(() => {});
    throw error;
  }
  ctx.originFeatures?.remember(
    repo,
    (originAdv.capabilities.find((c) => c.key === "fetch")?.value ?? "").split(" "),
  );
  let adv = withFetchFeature(originAdv, "packfile-uris");
  if (await offersBundles(ctx, repo)) adv = withCapability(adv, "bundle-uri");
  const out = serializeCapabilityAdvertisement(adv);
  return relay(origin, new Blob([out as Uint8Array<ArrayBuffer>]).stream(), {
    "cache-control": "no-cache",
  });
}

export async function handleReceivePack(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
): Promise<Response> {
  return await streamThrough(ctx, request, `${repo.originUrl}/git-receive-pack`);
}

/**
 * `POST <repo>/git-upload-pack`. Protocol v2 `fetch` requests are read (capped) and may be
 * rewritten; `bundle-uri` is answered by the edge when warm; every other command (ls-refs,
 * object-info, commands to come) and v0/v1 streams through as the client sent it.
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
    let head = await readPkts(reader, budget, false);
    if (head.length === 0) throw new ClientRequestError("empty request", 400);
    const { command } = requestCommand(head);
    let learn: ((status: number) => void) | undefined;
    if (command === "ls-refs" && ctx.lsRefsAhead) {
      const ahead = await ctx.lsRefsAhead.answer(ctx, request, repo, head, reader, budget);
      if (ahead.response) {
        // A clone's fetch follows its listing: the origin's word on it is asked for now (and
        // the mirror's update started, when the listing shows tips it lacks).
        const seen = listingSeen(ctx, request, repo, ahead.response);
        return ctx.tagListings?.observe(ctx, request, repo, ahead.read, ahead.askedAt!, seen) ??
          seen;
      }
      head = ahead.read;
      learn = ahead.learn;
    }
    if (command !== "fetch") {
      guarded.passThrough();
      const rest = prefixed(concat(head.map(pktBytes)), reader.remainder());
      // A warm repository's bundle list is the edge's own (src/proxy/bundles/bundle_answer.ts).
      const answer = command === "bundle-uri"
        ? await answerBundleUri(ctx, request, repo, url, head)
        : null;
      if (answer) {
        await rest.cancel().catch(() => {});
        return answer;
      }
      const askedAt = ctx.deps.clock.now();
      const relayed = await streamThrough(ctx, request, originUrl, rest);
      noteOriginVerdict(ctx, request, repo, relayed.status);
      // A listing the origin gave (a credential it knows): a clone's fetch follows, and the
      // origin's word on that is asked for now, not when the fetch comes (with the mirror's
      // update, when the listing shows tips the mirror lacks).
      const res = command === "ls-refs" ? listingSeen(ctx, request, repo, relayed) : relayed;
      learn?.(res.status);
      if (command !== "ls-refs" || !ctx.tagListings) return res;
      return ctx.tagListings.observe(ctx, request, repo, head, askedAt, res);
    }
    if (Number(request.headers.get("content-length") ?? 0) > max) {
      throw new RequestTooLargeError(`request body exceeds ${max} bytes`);
    }
    const headBytes = concat(head.map(pktBytes));
    if (head.at(-1)?.type === "flush") {
      req = parseCommandRequest(head);
      sent = headBytes;
      await nothingAfterRequest(reader);
    } else {
      // The arguments (a million `want` lines, maybe) are kept as they came and as text lines,
      // never as a packet object per line.
      const chunks: Uint8Array[] = [headBytes];
      const rest = new PktLineReader(prefixed(headBytes, recorded(reader.remainder(), chunks)));
      try {
        req = (await readCommandRequest(rest))!;
        await nothingAfterRequest(rest);
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
  // A partial clone's lazy fetches list no refs: nothing is to be sent ahead for them.
  if (args.filter !== null) ctx.lsRefsAhead?.partialFetch?.(ctx, request, repo);
  const scheme = new URL(publicBase(ctx, url)).protocol.replace(":", "");
  const plainClones = ctx.deps.config.snapshotPlainClones;
  const fetch = classifyFetch(req, args, scheme);
  const eligible = wantsSnapshot(fetch, plainClones);
  // Evictions of the store that begin from here on are noticed before the packs are pinned (in a
  // fleet, asked of the coordinator only when the snapshot is looked up at all).
  const epoch = !ctx.registry
    ? { local: 0, fleet: null }
    : eligible
    ? await ctx.registry.epochOf(repo.id)
    : { local: ctx.registry.evictionEpoch(repo.id), fleet: null };
  const looked = eligible ? await currentSnapshot(ctx, repo) : NO_SNAPSHOT;
  // A snapshot being evicted, or evicted since it was looked up, is not handed out: the fetch
  // plans as with none. Nothing is awaited from here to the pin below, so no eviction begins in
  // between and the pin holds.
  const mirror = ctx.deps.mirrors
    ? { originAdvertisesFilter: ctx.originFeatures?.advertises(repo, "filter") ?? false }
    : undefined;
  const inputs = {
    req,
    args,
    fetch,
    snapshot: looked,
    originAdvertisesUris: ctx.originFeatures?.advertises(repo, "packfile-uris") ?? false,
    recentlyAuthorised: (eligible || mirror !== undefined) &&
      recentlyAuthorised(ctx, request, repo),
    responseCacheOn: responseCacheBytes(ctx) > 0,
    snapshotPlainClones: plainClones,
    mirror,
  };
  if (!inputs.recentlyAuthorised && eligible && looked.manifest) {
    // Serving objects the origin did not send for this request needs the origin's word that this
    // credential may fetch (fetch_probe.ts); a listing of refs is not that word.
    const trusted = planFetch({ ...inputs, recentlyAuthorised: true });
    if (trusted.action === "answer-from-snapshot" || trusted.action === "stream-snapshot") {
      const verdict = await authorisedToFetch(
        ctx,
        request,
        repo,
        args.wants,
        trusted.manifest.objectFormat ?? "sha1",
      );
      if (verdict instanceof Response) return verdict;
      if (verdict === "authorised") inputs.recentlyAuthorised = true;
    }
  }
  // A snapshot being evicted, or evicted since it was looked up, is not handed out: the fetch
  // plans as with none. Nothing is awaited from here to the pin below, so no eviction begins in
  // between and the pin holds.
  const pinnable = !ctx.registry || ctx.registry.pinnable(repo.id, epoch.local);
  let plan = planFetch({ ...inputs, snapshot: pinnable ? looked : NO_SNAPSHOT });
  // Packs handed out are pinned: store eviction spares them until their URLs expire. In a fleet,
  // the pin is refused while another node evicts the snapshot: then nothing of it is handed out.
  if (
    (plan.action === "answer-from-snapshot" || plan.action === "rewrite" ||
      plan.action === "stream-snapshot") && !await pinSnapshot(ctx, repo, epoch)
  ) {
    plan = planFetch({ ...inputs, snapshot: NO_SNAPSHOT });
  }
  if (plan.noUris !== null) recordOutcome(ctx, { action: "no-uris", reason: plan.noUris });
  const seen = looked.manifest && !looked.missingPack ? looked.manifest : undefined;
  const call: FetchCall = { ctx, request, repo, url, req, args, sent, seen };
  // One function carries out each outcome of the plan.
  switch (plan.action) {
    case "answer-from-snapshot":
      return await answerFromSnapshot(call, plan);
    case "stream-snapshot":
      return streamedFetch(call, plan);
    case "rewrite":
      return await rewrittenFetch(call, plan);
    case "response-cache":
      return await cachedFetch(call, plan);
    case "forward":
      return await forwardedFetch(call, plan);
    case "answer-from-mirror":
      return await mirrorFetch(call, plan);
  }
}

/**
 * Pins `repo`'s snapshot for the lifetime of URLs handed out now (looked up at eviction `epoch`,
 * checked `pinnable` just before).
 */
async function pinSnapshot(
  ctx: ProxyContext,
  repo: RepoRef,
  epoch: EvictionEpoch,
): Promise<boolean> {
  if (!ctx.registry) return true;
  const now = Math.floor(ctx.deps.clock.now() / 1000);
  const until = expiryFor(now, ctx.deps.config.urlTtlSeconds) * 1000;
  // Here first (checked `pinnable` just before, nothing awaited since), then fleet-wide.
  ctx.registry.pin(repo, until, epoch.local);
  return await ctx.registry.pinFleet(repo, until, epoch);
}

/**
 * Refuses (400) a fetch body that goes on after its request's final flush: a stateless request
 * carries one command, and git's upload-pack would not read the rest.
 */
async function nothingAfterRequest(reader: PktLineReader): Promise<void> {
  const more = await reader.peek().then((pkt) => pkt !== null, () => true);
  if (more) {
    throw new ClientRequestError(
      "request goes on after its final flush (one command per request)",
      400,
    );
  }
}
