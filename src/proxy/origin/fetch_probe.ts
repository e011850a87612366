/**
 * Whether the origin lets a credential fetch a repository's objects: what the edge must know
 * before it serves objects the origin did not send for that request (a fetch answered from the
 * snapshot, a plain clone streamed from it, a stored answer of the response cache, a bundle list).
 *
 * The authority is the origin's answer to a `fetch`, never to `ls-refs` or `info/refs`: an origin
 * may list refs to anyone and guard its objects. When the credential memo (auth_memo.ts) has no
 * recent acceptance, the edge sends the origin, with the client's credentials, a fetch that costs
 * it next to nothing: `want` and `have` of the same tips, `done` (an empty pack; upload-pack does
 * no counting), or, with no tip known, a fetch without wants (upload-pack answers it with nothing).
 * A 200 that is no `ERR` fills the memo, as any fetch the origin serves does; a 401/403 drops it
 * and is relayed to the client as the origin sent it (git asks for credentials on a 401); anything
 * else (an `ERR`: a tip the origin no longer has) leaves the request to the origin.
 */
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import type { ObjectFormat } from "../../git/object_id.ts";
import { forwardHeaders } from "./origin.ts";
import { inBackground } from "../core/deps.ts";
import {
  fromOrigin,
  noteFetchVerdict,
  peekAnswer,
  recentlyAuthorised,
  relay,
} from "./forwarding.ts";
import { serializeCommandRequest } from "../../git/command_request.ts";
import { UPLOAD_PACK_REQUEST_TYPE, UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";

/** Tips named in a probe at most (the rest are covered by the credential, not by the probe). */
export const MAX_PROBE_TIPS = 256;

/** The verdict: served from the edge, refused (the origin's answer, to relay), or ask the origin. */
export type ProbeVerdict = "authorised" | "ask-origin" | Response;

/**
 * Whether `request`'s credential may fetch `repo`: the memo's word within `--auth-ttl` (after a
 * probe sent ahead for it, if one is under way), else the origin's answer to a probe fetch of
 * `tips` (see the module doc).
 */
export async function authorisedToFetch(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  tips: readonly string[],
  format: ObjectFormat,
): Promise<ProbeVerdict> {
  if (await probedAhead(ctx, request, repo)) return "authorised";
  return await probeFetch(ctx, request, repo, tips, format);
}

/** Probes sent ahead and not yet answered, per memo (process or isolate), by memo key. */
const AHEAD = new WeakMap<object, Map<string, Promise<boolean>>>();
/** Probes under way ahead at most, per memo. */
const MAX_AHEAD = 256;

/**
 * On a client's `ls-refs` of a repository the edge has a snapshot of (a clone's fetch comes
 * next): when the memo does not vouch for its credential, the probe fetch goes to the origin now,
 * alongside the listing, so the clone's fetch finds the origin's word in the memo instead of
 * waiting a round trip for it. Nothing changes in what is served: the memo is filled only by the
 * origin's answer to that fetch, dated when it was asked.
 */
export function probeAhead(ctx: ProxyContext, request: Request, repo: RepoRef): void {
  if (ctx.deps.config.authTtlSeconds <= 0 || recentlyAuthorised(ctx, request, repo)) return;
  let pending = AHEAD.get(ctx.authMemo);
  if (!pending) AHEAD.set(ctx.authMemo, pending = new Map());
  const key = ctx.authMemo.key(repo.id, request.headers.get("authorization"));
  if (pending.has(key) || pending.size >= MAX_AHEAD) return;
  const probe = (async () => {
    const manifest = await ctx.deps.coordinator.manifest(repo);
    if (!manifest) return false;
    const tips = [...new Set(Object.values(manifest.tips))];
    const verdict = await probeFetch(ctx, request, repo, tips, manifest.objectFormat ?? "sha1");
    if (verdict instanceof Response) await verdict.body?.cancel().catch(() => {});
    return verdict === "authorised";
  })().catch(() => false).finally(() => pending.delete(key));
  pending.set(key, probe);
  inBackground(ctx.deps, probe);
}

/** Whether the memo vouches for `request`'s credential, once a probe sent ahead has its answer. */
async function probedAhead(ctx: ProxyContext, request: Request, repo: RepoRef): Promise<boolean> {
  const key = ctx.authMemo.key(repo.id, request.headers.get("authorization"));
  await AHEAD.get(ctx.authMemo)?.get(key);
  return recentlyAuthorised(ctx, request, repo);
}

/** The probe itself (the memo not consulted). */
export async function probeFetch(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  tips: readonly string[],
  format: ObjectFormat,
): Promise<ProbeVerdict> {
  const named = [...new Set(tips)].slice(0, MAX_PROBE_TIPS);
  const body = serializeCommandRequest({
    command: "fetch",
    capabilities: format === "sha1"
      ? ["agent=gitedge/0.1"]
      : ["agent=gitedge/0.1", `object-format=${format}`],
    args: [
      "no-progress",
      ...named.map((t) => `want ${t}`),
      ...named.map((t) => `have ${t}`),
      "done",
    ],
  });
  const headers = forwardHeaders(request.headers);
  headers.set("git-protocol", "version=2");
  headers.set("content-type", UPLOAD_PACK_REQUEST_TYPE);
  headers.set("accept", UPLOAD_PACK_RESULT_TYPE);
  const askedAt = ctx.deps.clock.now();
  const origin = await fromOrigin(ctx, `${repo.originUrl}/git-upload-pack`, {
    method: "POST",
    headers,
    body: body as Uint8Array<ArrayBuffer>,
  });
  ctx.metrics.inc("gitedge_auth_probes_total", 1, { status: String(origin.status) });
  if (origin.status === 401 || origin.status === 403) {
    noteFetchVerdict(ctx, request, repo, origin.status, askedAt);
    return relay(origin, origin.body);
  }
  if (origin.status !== 200) {
    await origin.body?.cancel().catch(() => {});
    return "ask-origin";
  }
  // An answer without wants is empty; with wants it starts `packfile` (or `ERR`).
  const { served, body: rest } = named.length === 0
    ? { served: true, body: origin.body }
    : await peekAnswer(origin);
  await rest?.cancel().catch(() => {});
  if (!served) return "ask-origin";
  noteFetchVerdict(ctx, request, repo, 200, askedAt);
  return "authorised";
}
