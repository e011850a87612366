/**
 * The mirror's update started by a listing: when the origin has just answered a caller's
 * `ls-refs` (relayed, or sent ahead for that caller) of a repository the edge mirrors, and the
 * listing names tips the mirror lacks, the mirror's update (one `fetch` from the origin, see
 * src/proxy/mirror/mirrors.ts) starts at once with that caller's credential, while the caller's
 * own `fetch` is still to come; that fetch (and any other request that needs the new state)
 * joins it. The listing names the mirror's refs, so the update asks the origin for nothing but
 * the new objects.
 *
 * The update's answer is the origin's word on that credential (a whole `fetch` answer: the memo
 * is renewed; 401/403: dropped), so no probe fetch goes ahead for it; a listing that shows
 * nothing new sends the probe ahead as before (fetch_probe.ts). Nothing is served from here:
 * the caller's fetch is still answered only under the rules of mirror_fetch.ts.
 */
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import { inBackground } from "../core/deps.ts";
import { probeAhead } from "../origin/fetch_probe.ts";
import { noteFetchVerdict } from "../origin/forwarding.ts";
import { authOf } from "../origin/origin.ts";
import { readLsRefsAnswer } from "../../git/ls_refs.ts";

/** A listing longer than this is not read for the mirror (the fetch's update lists its own). */
export const MAX_WATCHED_LISTING_BYTES = 4 << 20;
/** Refs read from one listing at most. */
export const MAX_WATCHED_REFS = 100_000;

/**
 * `res`, the origin's answer to `request`'s `ls-refs` of `repo`, as the client gets it; read on
 * the side (a copy of its bytes) to start the mirror's update when it names tips the mirror
 * lacks; otherwise the probe goes ahead ({@link probeAhead}).
 */
export function listingSeen(
  ctx: ProxyContext,
  request: Request,
  repo: RepoRef,
  res: Response,
): Response {
  const mirrors = ctx.deps.mirrors;
  if (!mirrors || res.status !== 200 || !res.body) {
    if (res.status === 200) probeAhead(ctx, request, repo);
    return res;
  }
  const [client, side] = res.body.tee();
  const work = (async () => {
    const refs = await readListing(side);
    if (refs) mirrors.noteListing(repo, refs);
    if (!refs || !await mirrors.host.exists(repo)) return probeAhead(ctx, request, repo);
    const tips = [...new Set(Object.values(refs))];
    const lacking = tips.length === 0 ? [] : await mirrors.host.missing(repo, tips);
    if (lacking.length === 0) {
      // Nothing new to fetch; the mirror's refs follow the listing (for `include-tag`).
      probeAhead(ctx, request, repo);
      return await mirrors.syncRefs(repo, refs, authOf(request.headers));
    }
    const askedAt = ctx.deps.clock.now();
    const result = await mirrors.ensure(
      repo,
      lacking,
      authOf(request.headers),
      () => ctx.deps.coordinator.manifest(repo),
      {
        refs,
        onOriginStatus: (status) => noteFetchVerdict(ctx, request, repo, status, askedAt),
      },
    );
    ctx.deps.log?.log("info", "mirror.ahead", {
      repo: repo.path,
      tips: lacking.length,
      ...(result.ready ? {} : { reason: result.reason }),
    });
  })();
  // The caller's fetch waits for this before it looks at the mirror.
  mirrors.track(repo, work);
  inBackground(ctx.deps, work.catch(() => {}));
  return new Response(client, { status: res.status, headers: res.headers });
}

/**
 * The branches and tags of an `ls-refs` answer (ref → id), or null when it is not a whole,
 * well-formed listing within the bounds.
 */
async function readListing(
  body: ReadableStream<Uint8Array>,
): Promise<Record<string, string> | null> {
  try {
    const all = await readLsRefsAnswer(body, {
      maxBytes: MAX_WATCHED_LISTING_BYTES,
      maxRefs: MAX_WATCHED_REFS,
    });
    return Object.fromEntries(
      Object.entries(all).filter(([name]) => /^refs\/(heads|tags)\//.test(name)),
    );
  } catch {
    return null;
  }
}
