/**
 * The edge app: a Hono application built from injected dependencies. It knows nothing of the
 * runtime it runs on; `edge/deno/server.ts` and `edge/cloudflare/worker.ts` feed it.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { EdgeDeps, RepoRef } from "./deps.ts";
import { Metrics } from "./metrics.ts";
import { AuthMemo } from "./auth_memo.ts";
import { ResponseCache } from "./response_cache.ts";
import { resolveRepo, splitGitPath } from "./repo.ts";
import { UrlSigner } from "./signing.ts";
import { callOrigin } from "./origin.ts";
import { handleInfoRefs, handleReceivePack, handleUploadPack } from "./git_routes.ts";
import { OriginFeatures, type ProxyContext } from "./context.ts";
import { handlePackGet } from "./pack_routes.ts";
import { PACK_ROUTE } from "./pack_urls.ts";
import { BUNDLE_LIST_PREFIX, BUNDLE_ROUTE } from "./bundle_list.ts";
import { handleBundleListGet } from "./bundle_answer.ts";
import { handleBundleGet } from "./bundle_routes.ts";
import { edgeHttpError } from "./errors.ts";
import { ParseBudget } from "./parse_budget.ts";
import { type Logger, SILENT_LOGGER } from "./log.ts";
import { requestContext, requestLog } from "./request_log.ts";
import { HEALTH_ROUTES, liveResponse, readiness, readyResponse, StoreProbe } from "./health.ts";

export interface EdgeApp {
  app: Hono;
  fetch: (request: Request) => Promise<Response>;
  metrics: Metrics;
}

/**
 * Builds the app. `metrics`, `authMemo`, `responseCache` and `parseBudget` are per process (or
 * Worker isolate): pass them when the app itself is built per request.
 */
export function createApp(
  deps: EdgeDeps,
  opts: {
    metrics?: Metrics;
    authMemo?: AuthMemo;
    responseCache?: ResponseCache;
    parseBudget?: ParseBudget;
    /** The readiness probe's memory of the store's last write (per process or isolate). */
    storeProbe?: StoreProbe;
  } = {},
): EdgeApp {
  const metrics = opts.metrics ?? new Metrics();
  const signer = new UrlSigner(deps.signingKey);
  const authMemo = opts.authMemo ?? new AuthMemo();
  const responseCache = opts.responseCache ?? new ResponseCache();
  const parseBudget = opts.parseBudget ?? ParseBudget.forCap(deps.config.maxRequestBytes);
  const ctx: ProxyContext = {
    deps,
    metrics,
    signer,
    authMemo,
    responseCache,
    originFeatures: new OriginFeatures(),
    parseBudget,
  };
  const app = new Hono();
  const log = deps.log ?? SILENT_LOGGER;
  const storeProbe = opts.storeProbe ?? new StoreProbe();

  app.onError((err) => errorResponse(err, deps.log));
  app.notFound((c) => c.text("gitedge: not found\n", 404));
  app.use(requestLog(ctx, log));

  // Health for load balancers: unauthenticated, never the origin (src/proxy/health.ts).
  app.on(["GET", "HEAD"], HEALTH_ROUTES.live, () => liveResponse());
  app.on(["GET", "HEAD"], HEALTH_ROUTES.ready, async () => {
    const { ready, checks, storeError } = await readiness(deps, storeProbe);
    if (storeError !== undefined) log.log("error", "store.unwritable", { error: storeError });
    return readyResponse(ready, checks);
  });

  app.get("/_edge/metrics", (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "metrics" });
    return c.text(metrics.render(), 200, { "content-type": "text/plain; version=0.0.4" });
  });

  app.on(["GET", "HEAD"], BUNDLE_ROUTE, (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "bundle" });
    const rctx = requestContext(c.req.raw, ctx);
    return handleBundleGet(rctx, c.req.raw, c.req.param("id"), c.req.param("file"));
  });

  app.get(`${BUNDLE_LIST_PREFIX}*`, (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "bundle-list" });
    const repo = repoFromEdgePath(c, BUNDLE_LIST_PREFIX, ctx);
    return handleBundleListGet(requestContext(c.req.raw, ctx), c.req.raw, repo, new URL(c.req.url));
  });

  app.on(["GET", "HEAD"], PACK_ROUTE, (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "pack" });
    const rctx = requestContext(c.req.raw, ctx);
    return handlePackGet(rctx, c.req.raw, c.req.param("id"), c.req.param("file"));
  });

  // Status names a repository's tips, warm spends origin work. With an admin token configured,
  // both need it. Without one, they are private by default: the caller must be someone the
  // origin lets read the repository (its credentials in `X-Origin-Authorization`, or in
  // `Authorization`), checked with an `info/refs` request to the origin.
  const refusal = async (c: Context, repo: RepoRef): Promise<Response | null> => {
    const token = deps.config.adminToken;
    if (token) {
      return isAdmin(c.req.header("authorization"), token)
        ? null
        : c.json({ error: "admin token required" }, 401);
    }
    const credentials = c.req.header("x-origin-authorization") ?? c.req.header("authorization");
    const res = await callOrigin(
      deps.originFetch,
      `${repo.originUrl}/info/refs?service=git-upload-pack`,
      { method: "GET", headers: credentials ? { authorization: credentials } : {} },
    );
    await res.body?.cancel().catch(() => {});
    if (res.status === 200) return null;
    const status = res.status === 401 || res.status === 403 || res.status === 404
      ? res.status
      : 403;
    return c.json({ error: `the origin did not let this caller read ${repo.path}` }, status);
  };

  app.get("/_edge/status/*", async (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "status" });
    const repo = repoFromEdgePath(c, "/_edge/status/", ctx);
    const refused = await refusal(c, repo);
    if (refused) return refused;
    return c.json({ repo: repo.path, snapshot: await deps.coordinator.status(repo) });
  });

  app.post("/_edge/warm/*", async (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "warm" });
    const repo = repoFromEdgePath(c, "/_edge/warm/", ctx);
    const refused = await refusal(c, repo);
    if (refused) return refused;
    // Without an admin token, `Authorization` carries origin credentials, as for git.
    const originAuth = c.req.header("x-origin-authorization") ??
      (deps.config.adminToken ? undefined : c.req.header("authorization"));
    const auth = {
      headers: originAuth ? { authorization: originAuth } : {} as Record<string, string>,
    };
    return c.json({ repo: repo.path, snapshot: await deps.coordinator.warm(repo, auth) });
  });

  app.all("*", async (c) => {
    const url = new URL(c.req.url);
    const split = splitGitPath(url.pathname);
    if (!split) return c.text("gitedge: not a Git smart-HTTP path\n", 404);
    const repo = resolveRepo(split.path, deps.config);
    metrics.inc("gitedge_requests_total", 1, { route: split.endpoint });
    const rctx = requestContext(c.req.raw, ctx);
    if (split.endpoint === "info/refs" && c.req.method === "GET") {
      return await handleInfoRefs(rctx, c.req.raw, repo, url);
    }
    if (split.endpoint === "git-upload-pack" && c.req.method === "POST") {
      return await handleUploadPack(rctx, c.req.raw, repo, url);
    }
    if (split.endpoint === "git-receive-pack" && c.req.method === "POST") {
      return await handleReceivePack(rctx, c.req.raw, repo);
    }
    return c.text("gitedge: method not allowed\n", 405);
  });

  return { app, fetch: (request) => Promise.resolve(app.fetch(request)), metrics };
}

function repoFromEdgePath(c: Context, prefix: string, ctx: ProxyContext): RepoRef {
  const path = new URL(c.req.url).pathname.slice(prefix.length).replace(/\/+$/, "");
  return resolveRepo(path, ctx.deps.config);
}

/** Whether `authorization` carries the admin token (constant-time). */
function isAdmin(authorization: string | undefined, token: string): boolean {
  const given = new TextEncoder().encode(authorization ?? "");
  const want = new TextEncoder().encode(`Bearer ${token}`);
  let diff = given.length ^ want.length;
  for (let i = 0; i < want.length; i++) diff |= want[i] ^ (given[i] ?? 0);
  return diff === 0;
}

/**
 * An error that owns its response (`EdgeHttpError`, Git wire errors as 400) answers with it: a
 * text/plain body git shows to its user, its message through `publicMessage` (no credentials, no
 * server paths). An unexpected error's message stays in the server's log.
 */
function errorResponse(err: Error, log?: Logger): Response {
  const known = edgeHttpError(err);
  if (known) return known.response();
  if (log) log.log("error", "internal.error", { error: err, stack: err.stack });
  else console.error("gitedge: internal error:", err);
  return new Response("gitedge: internal error (details are in the edge's log)\n", {
    status: 500,
    headers: { "content-type": "text/plain; charset=UTF-8" },
  });
}
