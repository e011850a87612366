/**
 * The `answer-from-mirror` outcome of a fetch plan: git's own `upload-pack` answers from the
 * edge's mirror of the repository (src/proxy/mirror), once the mirror holds every want. The
 * origin is asked only for what is new (one incremental fetch per new state of the repository,
 * shared by every request that needs it) and, for a credential it has not accepted within
 * `--auth-ttl`, for its word first (a probe fetch that costs it no pack). Whenever the mirror cannot answer (no snapshot to seed
 * it from, the update failed, upload-pack failed), the fetch is carried out as with no mirror.
 */
import { authorisedToFetch } from "../origin/fetch_probe.ts";
import { NO_SNAPSHOT_TO_SEED } from "../mirror/mirrors.ts";
import { noteBytesSaved } from "../ops/bytes_saved.ts";
import { recordOutcome } from "../core/request_record.ts";
import type { FallbackPlan } from "./fetch_plan.ts";
import type { FetchCall, PlanOf } from "./fetch_call.ts";
import { scheduleBuild } from "./fetch_call.ts";
import { cachedFetch } from "./cached_fetch.ts";
import { forwardedFetch } from "./forwarded_fetch.ts";
import { authOf } from "../origin/origin.ts";
import { noteFetchVerdict, recentlyAuthorised } from "../origin/forwarding.ts";
import { inBackground } from "../core/deps.ts";
import { withoutArg } from "../origin/request_body.ts";
import { UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";

export async function mirrorFetch(
  call: FetchCall,
  plan: PlanOf<"answer-from-mirror">,
): Promise<Response> {
  const { ctx, request, repo, args } = call;
  const mirrors = ctx.deps.mirrors;
  if (!mirrors) return await fallback(call, plan.fallback);
  // The mirror's work under way (this caller's listing read, the update it started) first: the
  // mirror's refs follow that listing, and the update's answer is the origin's word on the
  // credential (no probe needed).
  await mirrors.running(repo);
  const accepted = plan.askOrigin && !recentlyAuthorised(ctx, request, repo)
    ? await originAccepts(call)
    : true;
  if (accepted instanceof Response) {
    recordOutcome(ctx, { action: "mirror", result: "not-authorised" });
    return accepted;
  }
  if (!accepted) {
    // Refused (or the origin failed): the fetch goes to the origin, whose answer (a 401) the
    // client gets; not a byte of the mirror.
    recordOutcome(ctx, { action: "mirror", result: "not-authorised" });
    return await fallback(call, plan.fallback);
  }
  const askedAt = ctx.deps.clock.now();
  const ready = await mirrors.ensure(
    repo,
    args.wants,
    authOf(request.headers),
    () => ctx.deps.coordinator.manifest(repo),
    { onOriginStatus: (status) => noteFetchVerdict(ctx, request, repo, status, askedAt) },
  );
  if (!ready.ready) {
    recordOutcome(ctx, { action: "mirror", result: "fallback" });
    ctx.deps.log?.log("info", "mirror.fallback", { repo: repo.path, reason: ready.reason });
    // A repository that has no snapshot yet gets its first build once the origin has served this
    // fetch (whatever its shape: CI's depth-1 and blobless fetches would otherwise never warm a
    // repository): the mirror is seeded from it, and later fetches of this kind are its.
    const first = ready.reason === NO_SNAPSHOT_TO_SEED && plan.fallback.build === null;
    const build = first ? { builtAt: null, rebuild: false } : plan.fallback.build;
    return await fallback(call, { ...plan.fallback, build });
  }
  // The mirror hands out no URIs: the client's `packfile-uris` line goes (upload-pack would
  // refuse an argument it did not advertise).
  const body = args.packfileUris ? withoutArg(call.sent, "packfile-uris") : call.sent;
  const answer = await mirrors.serve(repo, body);
  if (answer === null) {
    recordOutcome(ctx, { action: "mirror", result: "busy" });
    return await fallback(call, plan.fallback);
  }
  if (!answer.ok) {
    // A damaged mirror is never served: it goes, and is seeded afresh by a later fetch.
    recordOutcome(ctx, { action: "mirror", result: "damaged" });
    ctx.deps.log?.log("warn", "mirror.discard", { repo: repo.path, reason: answer.reason });
    inBackground(ctx.deps, mirrors.discard(repo.id));
    return await fallback(call, plan.fallback);
  }
  recordOutcome(ctx, { action: "mirror", result: ready.updated ? "updated" : "hit" });
  ctx.registry?.noteFetch(repo, "mirror", true, call.seen);
  scheduleBuild(call, plan.build);
  // Every byte of the mirror's answer is one the origin did not send.
  const counted = answer.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, out) {
        ctx.metrics.inc("gitedge_mirror_bytes_total", chunk.byteLength);
        noteBytesSaved(ctx, repo.id, chunk.byteLength, "mirror");
        out.enqueue(chunk);
      },
    }),
  );
  return new Response(counted, {
    status: 200,
    headers: { "content-type": UPLOAD_PACK_RESULT_TYPE, "cache-control": "no-cache" },
  });
}

/** What the plan does when the mirror does not answer: as if there were no mirror. */
async function fallback(call: FetchCall, plan: FallbackPlan): Promise<Response> {
  return plan.action === "response-cache"
    ? await cachedFetch(call, plan)
    : await forwardedFetch(call, plan);
}

/**
 * Asks the origin whether it lets the caller fetch this repository now: a probe fetch with the
 * caller's headers that costs the origin no pack (fetch_probe.ts; a listing of refs is not that
 * word: an origin may list refs to anyone and guard its objects). A 401/403 is the client's
 * answer as the origin sent it; a 200 renews the credential memo.
 */
async function originAccepts(call: FetchCall): Promise<boolean | Response> {
  const { ctx, request, repo } = call;
  try {
    const verdict = await authorisedToFetch(ctx, request, repo, [], "sha1");
    return verdict instanceof Response ? verdict : verdict === "authorised";
  } catch {
    return false;
  }
}
