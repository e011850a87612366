/**
 * What the edge did with one request, recorded where it was done: each outcome of a request's
 * handling ({@link Outcome}) is written once, by {@link recordOutcome}, into the counters and into
 * the request's {@link RequestRecord}, from which the access log writes its line and the Deno
 * server's drain learns that a client was handed pack URIs.
 */
import type { Metrics } from "./metrics.ts";

/** One request's record (the access log's `action`, `reason`, `cache`, `packUris`, origin time). */
export interface RequestRecord {
  /**
   * What the edge did: `answered`, `rewrote`, `cache-hit`, `cache-miss`, `passthrough`, `pack`,
   * `lfs-rewrote`, `lfs-hit`, `lfs-miss`, `lfs-origin-error`.
   */
  action?: string;
  /** Why a fetch got no packfile URIs. */
  reason?: string;
  /** The response cache's answer: `hit` or `miss`. */
  cache?: string;
  /** Packfile URIs handed out (a client given some downloads them next). */
  packUris?: number;
  /** Until the origin's headers, summed over the request's origin calls. */
  originMs?: number;
  /** The last origin call's status. */
  originStatus?: number;
  /** What the git mirror did: `hit`, `updated`, `fallback`, `busy`, `damaged`, `not-authorised`. */
  mirror?: string;
}

/** An outcome of a request's handling. */
export type Outcome =
  /**
   * A fetch got no packfile URIs, for `reason` (logged as action `passthrough`, counted in
   * `gitedge_fetch_passthrough_total`: the names users see, kept).
   */
  | { action: "no-uris"; reason: string }
  /** A fetch answered by the edge alone, or rewritten: `packUris` handed out. */
  | { action: "answered" | "rewrote"; packUris: number }
  /** A fetch answered from the response cache, or sent to the origin through it. */
  | { action: "cache-hit" | "cache-miss" }
  /** `bytes` of stored snapshot packs handed out (a pack or bundle download, a streamed clone). */
  | { action: "pack"; bytes: number }
  /** The git mirror's part in a fetch: `hit` and `updated` answered it, the rest fell back. */
  | { action: "mirror"; result: string }
  /** An LFS batch answer rewritten: `urls` edge URLs handed out. */
  | { action: "lfs-rewrote"; urls: number }
  /** An LFS object served from the store, filled from the origin, or refused by it. */
  | { action: "lfs-hit" | "lfs-miss" | "lfs-origin-error" };

/**
 * Writes `outcome` into the counters and into the request's `record` (absent outside a request).
 * An outcome later in a request names its action, but for a cache miss after no URIs (why no
 * URIs tells more).
 */
export function recordOutcome(
  ctx: { metrics: Metrics; record?: RequestRecord },
  outcome: Outcome,
): void {
  const { metrics } = ctx;
  const record = ctx.record ?? {};
  switch (outcome.action) {
    case "no-uris":
      metrics.inc("gitedge_fetch_passthrough_total", 1, { reason: outcome.reason });
      record.action = "passthrough";
      record.reason = outcome.reason;
      return;
    case "answered":
    case "rewrote":
      metrics.inc(
        outcome.action === "answered"
          ? "gitedge_fetch_answered_total"
          : "gitedge_fetch_rewrites_total",
      );
      metrics.inc("gitedge_packfile_uris_total", outcome.packUris);
      record.action = outcome.action;
      record.packUris = (record.packUris ?? 0) + outcome.packUris;
      return;
    case "cache-hit":
    case "cache-miss":
      metrics.inc("gitedge_response_cache_total", 1, {
        result: outcome.action === "cache-hit" ? "hit" : "miss",
      });
      record.cache = outcome.action === "cache-hit" ? "hit" : "miss";
      if (outcome.action === "cache-hit") record.action = outcome.action;
      else record.action ??= outcome.action;
      return;
    case "pack":
      metrics.inc("gitedge_cache_bytes_total", outcome.bytes);
      record.action = "pack";
      return;
    case "mirror":
      metrics.inc("gitedge_mirror_total", 1, { result: outcome.result });
      record.mirror = outcome.result;
      // The mirror answered (the plan's passthrough reason stays: why not the snapshot).
      if (outcome.result === "hit" || outcome.result === "updated") record.action = "mirror";
      return;
    case "lfs-rewrote":
      metrics.inc("gitedge_lfs_urls_total", outcome.urls);
      record.action = outcome.action;
      return;
    case "lfs-hit":
    case "lfs-miss":
    case "lfs-origin-error":
      metrics.inc("gitedge_lfs_objects_total", 1, { result: outcome.action.slice(4) });
      record.action = outcome.action;
      return;
  }
}
