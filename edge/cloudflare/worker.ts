/**
 * The Cloudflare Worker entry: a thin adapter that builds the edge app's dependencies from the
 * Worker's bindings and hands every request to `createApp` (the same app the Deno server runs).
 * Packs live in R2; each repository's snapshot builds run single-flight in its
 * `RepoSnapshotsObject` Durable Object, exported here so the runtime can instantiate it.
 */
import { createApp } from "../../src/proxy/app.ts";
import { LfsState } from "../../src/proxy/lfs/lfs_objects.ts";
import type { EdgeDeps } from "../../src/proxy/core/deps.ts";
import { Metrics } from "../../src/proxy/core/metrics.ts";
import { ParseBudget } from "../../src/proxy/core/parse_budget.ts";
import { AuthMemo } from "../../src/proxy/origin/auth_memo.ts";
import { CacheFills } from "../../src/proxy/core/response_cache.ts";
import { TagListings } from "../../src/proxy/origin/tag_listings.ts";
import type { Env } from "./env.ts";
import type { RepoRegistry } from "../../src/proxy/ops/repo_registry.ts";
import type { StoreEvictor } from "../../src/proxy/ops/store_eviction.ts";
import { SettingError } from "../../src/proxy/settings/resolve.ts";
import { edgeDepsFromEnv } from "./worker_deps.ts";
import {
  HEALTH_ROUTES,
  liveResponse,
  readyResponse,
  StoreProbe,
} from "../../src/proxy/ops/health.ts";
import type { ExecutionContext, ExportedHandler } from "./worker_types.ts";

export { RepoSnapshotsObject } from "./repo_snapshots_object.ts";
export type { Env } from "./env.ts";

type FetchHandler = (request: Request, env: Env, ctx: ExecutionContext) => Promise<Response>;

/**
 * The Worker's fetch handler. The handler owns the metrics of the isolate it runs in, so
 * `/_edge/metrics` counts every request this isolate served (Cloudflare runs many isolates; each
 * reports its own share). Likewise the memo of credentials the origin accepted and the response cache's fills.
 */
function createFetchHandler(): FetchHandler {
  const metrics = new Metrics();
  const authMemo = new AuthMemo();
  const cacheFills = new CacheFills();
  const storeProbe = new StoreProbe();
  // Each credential's newest ls-refs tag digest (strings only: nothing crosses requests but them).
  const tagListings = new TagListings();
  let parseBudget: ParseBudget | undefined;
  // The repository registry and the store's evictor of this isolate (made with its first
  // request's bindings, which are the same for every request of the isolate).
  let registry: RepoRegistry | undefined;
  let evictor: StoreEvictor | undefined;
  // LFS grants (origin hrefs, in memory only), fills under way and pins of this isolate.
  // Fills are announced in R2 so that other isolates missing the same object wait for them.
  const lfs = new LfsState(undefined, true);
  return async (request, env, ctx) => {
    let deps: EdgeDeps;
    try {
      deps = edgeDepsFromEnv(env, ctx, metrics);
    } catch (error) {
      if (!(error instanceof SettingError)) throw error;
      // Health answers even so: alive, and not ready (without a signing key, say).
      const path = new URL(request.url).pathname;
      if (path === HEALTH_ROUTES.live) return liveResponse();
      if (path === HEALTH_ROUTES.ready) {
        const key = error.setting === "signingKey" ? "not loaded" : "ok";
        return readyResponse(false, { settings: "misconfigured", signingKey: key });
      }
      console.error(`gitedge: misconfigured Worker: ${error.message}`);
      return new Response(`gitedge: misconfigured edge: ${error.message}\n`, {
        status: 500,
        headers: { "content-type": "text/plain; charset=utf-8" },
      });
    }
    parseBudget ??= ParseBudget.forCap(deps.config.maxRequestBytes);
    const app = createApp(deps, {
      metrics,
      authMemo,
      cacheFills,
      parseBudget,
      storeProbe,
      tagListings,
      registry,
      evictor,
      lfs,
    });
    registry ??= app.registry;
    evictor ??= app.evictor;
    return await app.fetch(request);
  };
}

export default { fetch: createFetchHandler() } satisfies ExportedHandler<Env>;
