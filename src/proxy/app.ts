/**
 * The edge app: a Hono application built from injected dependencies. It knows nothing of the
 * runtime it runs on; `edge/deno/server.ts` and `edge/cloudflare/worker.ts` feed it.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { type EdgeDeps, inBackground } from "./core/deps.ts";
import { withDefaults } from "./core/config.ts";
import type { RepoRef } from "./core/repo.ts";
import { Metrics } from "./core/metrics.ts";
import { AuthMemo } from "./origin/auth_memo.ts";
import { CacheFills } from "./core/response_cache.ts";
import { resolveRepo, splitGitPath } from "./core/repo.ts";
import { FLEET_URL_LEEWAY_SECONDS, UrlSigner } from "./core/signing.ts";
import { callOrigin } from "./origin/origin.ts";
import { handleInfoRefs, handleReceivePack, handleUploadPack } from "./fetch/git_routes.ts";
import { OriginFeatures, type ProxyContext } from "./core/context.ts";
import { handlePackGet } from "./downloads/pack_routes.ts";
import { PACK_ROUTE } from "./downloads/pack_urls.ts";
import { BUNDLE_LIST_PREFIX, BUNDLE_ROUTE } from "./bundles/bundle_list.ts";
import { handleBundleListGet } from "./bundles/bundle_answer.ts";
import { handleBundleGet } from "./bundles/bundle_routes.ts";
import { edgeHttpError } from "./core/errors.ts";
import { ParseBudget } from "./core/parse_budget.ts";
import { type Logger, SILENT_LOGGER } from "./core/log.ts";
import { type EdgeEnv, requestLog } from "./ops/request_log.ts";
import type { RequestRecord } from "./core/request_record.ts";
import { HEALTH_ROUTES, liveResponse, readiness, readyResponse, StoreProbe } from "./ops/health.ts";
import { currentSnapshot } from "./snapshots/current_snapshot.ts";
import { LsRefsAhead } from "./origin/ls_refs_ahead.ts";
import { TagListings } from "./origin/tag_listings.ts";
import { RepoRegistry } from "./ops/repo_registry.ts";
import { StoreEvictor } from "./ops/store_eviction.ts";
import { overview, renderPage, statusJson } from "./ops/operator_page.ts";
import { repoFamilies, storeFamilies } from "./ops/repo_metrics.ts";
import { LFS_OBJECT_ROUTE, splitLfsPath } from "./lfs/lfs_urls.ts";
import { handleLfsObjectGet, LfsState } from "./lfs/lfs_objects.ts";
import { handleLfsBatch, handleLfsPassThrough } from "./lfs/lfs_api.ts";
import { lfsError } from "./lfs/lfs_origin.ts";
import { BASIC_CHALLENGE, isAdmin } from "./ops/admin_auth.ts";
import { purgeRepo } from "./ops/purge.ts";
import { noteBytesSaved } from "./ops/bytes_saved.ts";

export interface EdgeApp {
  app: Hono<EdgeEnv>;
  fetch: (request: Request) => Promise<Response>;
  /** As `fetch`, with the record of what the edge did (the Deno server's drain reads it). */
  handle: (request: Request) => Promise<{ response: Response; record: RequestRecord }>;
  metrics: Metrics;
  /** The repositories the edge knows (flush it when stopping). */
  registry: RepoRegistry;
  /** Keeps the store under `storeMaxBytes` (sweep it after a build publishes). */
  evictor: StoreEvictor;
  /** LFS grants, fills and pins of this process or isolate. */
  lfs: LfsState;
}

/** Repositories the operator's page checks with the origin for a caller without admin token. */
const MAX_CHECKED_WITHOUT_TOKEN = 50;

/**
 * Builds the app. `metrics`, `authMemo`, `cacheFills` and `parseBudget` are per process (or
 * Worker isolate): pass them when the app itself is built per request.
 */
export function createApp(
  given: EdgeDeps,
  opts: {
    metrics?: Metrics;
    authMemo?: AuthMemo;
    cacheFills?: CacheFills;
    parseBudget?: ParseBudget;
    /** The readiness probe's memory of the store's last write (per process or isolate). */
    storeProbe?: StoreProbe;
    lsRefsAhead?: LsRefsAhead;
    tagListings?: TagListings;
    registry?: RepoRegistry;
    evictor?: StoreEvictor;
    /** LFS grants, fills and pins (per process or isolate). */
    lfs?: LfsState;
  } = {},
): EdgeApp {
  // Defaults are filled in once, here: the routes read the config as resolved.
  const deps = { ...given, config: withDefaults(given.config) };
  const metrics = opts.metrics ?? new Metrics();
  // In a fleet, URLs signed on one node's clock are checked on another's.
  const signer = new UrlSigner(deps.signingKey, deps.fleet ? FLEET_URL_LEEWAY_SECONDS : 0);
  const authMemo = opts.authMemo ?? new AuthMemo();
  const cacheFills = opts.cacheFills ?? new CacheFills();
  const parseBudget = opts.parseBudget ?? ParseBudget.forCap(deps.config.maxRequestBytes);
  const registry = opts.registry ?? new RepoRegistry(deps.store, deps.clock, deps.fleet?.registry);
  const lfs = opts.lfs ?? new LfsState();
  const evictor = opts.evictor ?? new StoreEvictor({
    store: deps.store,
    registry,
    coordinator: deps.coordinator,
    clock: deps.clock,
    metrics,
    maxBytes: deps.config.storeMaxBytes,
    // A snapshot just built serves before it may be evicted: for as long as its URLs live.
    freshMs: deps.config.urlTtlSeconds * 1000,
    log: deps.log,
    lfs,
    // A repository's git mirror goes with its snapshot.
    onEvicted: deps.mirrors ? (id) => deps.mirrors!.discard(id) : undefined,
    // A fleet has one sweeper: every sweep of every node goes through the lease.
    exclusive: deps.fleet ? (work) => deps.fleet!.exclusive("sweep", work) : undefined,
    fleetFull: deps.fleet?.storeFull,
  });
  metrics.collect(
    "repos",
    (scrape) => Promise.resolve(repoFamilies(registry, deps.clock, undefined, scrape)),
  );
  metrics.collect("store", () => storeFamilies(evictor));
  if (deps.mirrors) {
    const mirrors = deps.mirrors;
    metrics.collect("mirrors", () => mirrors.collect());
    // A layer packed from a mirror is a pack the origin did not send to the build.
    mirrors.onLayerBytes = (id, bytes) => noteBytesSaved({ metrics, registry }, id, bytes, "layer");
  }
  const ctx: ProxyContext = {
    deps,
    metrics,
    signer,
    authMemo,
    cacheFills,
    originFeatures: new OriginFeatures(),
    parseBudget,
    // What it learns lives as long as the app: on Workers, built per request, it never sends.
    lsRefsAhead: opts.lsRefsAhead ?? new LsRefsAhead(),
    tagListings: opts.tagListings ?? new TagListings(),
    registry,
    admitBuild: (repo) => evictor.admit(repo),
  };
  const app = new Hono<EdgeEnv>();
  // Counted by the route label of the request log (one label function: request_log.ts routeOf).
  const count = (c: Context<EdgeEnv>) =>
    metrics.inc("gitedge_requests_total", 1, { route: c.var.scope.route });
  const log = deps.log ?? SILENT_LOGGER;
  const storeProbe = opts.storeProbe ?? new StoreProbe();
  const background = (work: Promise<unknown>) => inBackground(deps, work);

  app.onError((err) => errorResponse(err, deps.log));
  app.notFound((c) => c.text("gitedge: not found\n", 404));
  app.use(requestLog(ctx, log));

  // Health for load balancers: unauthenticated, never the origin (src/proxy/ops/health.ts).
  app.on(["GET", "HEAD"], HEALTH_ROUTES.live, () => liveResponse());
  app.on(["GET", "HEAD"], HEALTH_ROUTES.ready, async () => {
    const { ready, checks, storeError } = await readiness(deps, storeProbe);
    if (storeError !== undefined) log.log("error", "store.unwritable", { error: storeError });
    return readyResponse(ready, checks);
  });

  // Per-repository series name repositories: only for a scrape with the admin token (the
  // operator page's rule; `Authorization: Bearer TOKEN`, as Prometheus sends it), aggregates
  // otherwise, and always without a token configured (no caller can prove it may see them all).
  app.get("/_edge/metrics", async (c) => {
    count(c);
    const token = deps.config.adminToken;
    const perRepository = token !== undefined && token !== "" &&
      isAdmin(c.req.header("authorization"), token, { basic: true });
    return c.text(await metrics.renderAll({ perRepository }), 200, {
      "content-type": "text/plain; version=0.0.4",
    });
  });

  app.on(["GET", "HEAD"], BUNDLE_ROUTE, (c) => {
    count(c);
    return handleBundleGet(c.var.scope.ctx, c.req.raw, c.req.param("id"), c.req.param("file"));
  });

  app.get(`${BUNDLE_LIST_PREFIX}*`, (c) => {
    count(c);
    const repo = repoFromEdgePath(c, BUNDLE_LIST_PREFIX, ctx);
    return handleBundleListGet(c.var.scope.ctx, c.req.raw, repo, new URL(c.req.url));
  });

  app.on(["GET", "HEAD"], PACK_ROUTE, (c) => {
    count(c);
    return handlePackGet(c.var.scope.ctx, c.req.raw, c.req.param("id"), c.req.param("file"));
  });

  app.on(["GET", "HEAD"], LFS_OBJECT_ROUTE, (c) => {
    count(c);
    const rctx = c.var.scope.ctx;
    return handleLfsObjectGet(rctx, lfs, c.req.raw, c.req.param("id"), c.req.param("oid"));
  });

  // Status names a repository's tips, warm spends origin work. With an admin token configured,
  // both need it. Without one, they are private by default: the caller must be someone the
  // origin lets read the repository (its credentials in `X-Origin-Authorization`, or in
  // `Authorization`), checked with an `info/refs` request to the origin.
  // The origin's answer (its status) to whether the caller may read `repo`.
  const originVerdict = async (c: Context, repo: RepoRef): Promise<number> => {
    const credentials = c.req.header("x-origin-authorization") ?? c.req.header("authorization");
    const res = await callOrigin(
      deps.originFetch,
      `${repo.originUrl}/info/refs?service=git-upload-pack`,
      { method: "GET", headers: credentials ? { authorization: credentials } : {} },
    );
    await res.body?.cancel().catch(() => {});
    return res.status;
  };
  // `basic`: the route changes nothing, so a browser's Basic credentials may carry the token.
  const refusal = async (c: Context, repo: RepoRef, basic = false): Promise<Response | null> => {
    const token = deps.config.adminToken;
    if (token) {
      return isAdmin(c.req.header("authorization"), token, { basic })
        ? null
        : c.json({ error: "admin token required" }, 401);
    }
    const verdict = await originVerdict(c, repo);
    if (verdict === 200) return null;
    const status = verdict === 401 || verdict === 403 || verdict === 404 ? verdict : 403;
    return c.json({ error: `the origin did not let this caller read ${repo.path}` }, status);
  };

  // The operator's overview. With an admin token, it needs the token and lists everything; without
  // one, it lists only repositories the origin lets the caller read (the rule of status), the
  // most recently cloned first, checking at most MAX_CHECKED_WITHOUT_TOKEN of them.
  const operatorOverview = async (c: Context) => {
    const token = deps.config.adminToken;
    if (token && !isAdmin(c.req.header("authorization"), token, { basic: true })) return null;
    const records = await registry.list();
    const usage = await evictor.usage();
    const visible = token
      ? undefined
      : async (repo: RepoRef) => await originVerdict(c, repo).catch(() => 0) === 200;
    return await overview(records, deps.coordinator, usage, deps.clock.now(), {
      lfs: { hits: lfs.hits, misses: lfs.misses },
      visible,
      limit: token ? undefined : MAX_CHECKED_WITHOUT_TOKEN,
      mirrors: deps.mirrors,
    });
  };
  const page = async (c: Context<EdgeEnv>) => {
    count(c);
    const o = await operatorOverview(c);
    if (!o) {
      // Basic first: the challenge a browser prompts for (any user name, the token as password).
      return c.text(
        "gitedge: admin token required (Authorization: Bearer TOKEN, or Basic with the token as password)\n",
        401,
        { "www-authenticate": BASIC_CHALLENGE },
      );
    }
    return c.html(renderPage(o), 200, {
      "cache-control": "no-store",
      "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'",
      "x-content-type-options": "nosniff",
    });
  };
  app.get("/_edge", page);
  app.get("/_edge/", page);
  app.get("/_edge/repos", async (c) => {
    count(c);
    const o = await operatorOverview(c);
    if (!o) return c.json({ error: "admin token required" }, 401);
    return c.json(o, 200, { "cache-control": "no-store" });
  });

  app.get("/_edge/status/*", async (c) => {
    count(c);
    const repo = repoFromEdgePath(c, "/_edge/status/", ctx);
    const refused = await refusal(c, repo, true);
    if (refused) return refused;
    return c.json({ repo: repo.path, snapshot: statusJson(await deps.coordinator.status(repo)) });
  });

  app.post("/_edge/warm/*", async (c) => {
    count(c);
    const repo = repoFromEdgePath(c, "/_edge/warm/", ctx);
    const refused = await refusal(c, repo);
    if (refused) return refused;
    // Without an admin token, `Authorization` carries origin credentials, as for git.
    const originAuth = c.req.header("x-origin-authorization") ??
      (deps.config.adminToken ? undefined : c.req.header("authorization"));
    const auth = {
      headers: originAuth ? { authorization: originAuth } : {} as Record<string, string>,
    };
    // A snapshot with a pack missing, truncated or rewritten since it was published is rebuilt
    // afresh, not reported ready (the same look-ups a fetch makes before handing out URIs).
    const { missingPack } = await currentSnapshot(ctx, repo);
    if (!await evictor.admit(repo)) {
      // Nothing is built: a snapshot would not fit beside what the store must keep.
      return c.json({
        repo: repo.path,
        error: "the store is over its cap by what is pinned or just built: no build now",
        snapshot: statusJson(await deps.coordinator.status(repo)),
      }, 507);
    }
    const status = await deps.coordinator.warm(repo, auth, { rebuild: missingPack });
    const manifest = status.state === "ready" ? await deps.coordinator.manifest(repo) : null;
    if (manifest) registry.noteSnapshot(repo, manifest);
    // The store grew: with a cap, sweep it now (the Deno server also does after every build).
    if (evictor.maxBytes > 0) background(evictor.sweep());
    return c.json({ repo: repo.path, snapshot: statusJson(status) });
  });

  // Purging one repository now (a secret removed at the origin): the admin token, always; an
  // edge without one configured has no purge (src/proxy/ops/purge.ts, docs/access.md).
  app.post("/_edge/purge/*", async (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "purge" });
    const token = deps.config.adminToken;
    if (!token) {
      return c.json({ error: "purge needs an admin token configured (--admin-token)" }, 403);
    }
    if (!isAdmin(c.req.header("authorization"), token)) {
      return c.json({ error: "admin token required" }, 401);
    }
    const repo = repoFromEdgePath(c, "/_edge/purge/", ctx);
    const purged = await purgeRepo(deps.store, repo);
    // Its git mirror holds the same objects (and any the origin let it fetch by id): it goes too.
    const mirror = deps.mirrors ? await deps.mirrors.forget(repo) : false;
    log.log("info", "repo.purge", { repo: repo.path, ...purged, mirror });
    return c.json({ repo: repo.path, purged: { ...purged, mirror } }, 200, {
      "cache-control": "no-store",
    });
  });

  app.all("*", async (c) => {
    const url = new URL(c.req.url);
    const lfsPath = splitLfsPath(url.pathname);
    if (lfsPath) {
      const repo = resolveRepo(lfsPath.path, deps.config);
      count(c);
      const rctx = c.var.scope.ctx;
      if (!LFS_REST.test(lfsPath.rest) || lfsPath.rest.split("/").some((s) => /^\.+$/.test(s))) {
        return lfsError(404, "not a Git LFS API path");
      }
      if (lfsPath.rest === "objects/batch" && c.req.method === "POST") {
        return await handleLfsBatch(rctx, lfs, c.req.raw, repo, url);
      }
      return await handleLfsPassThrough(rctx, c.req.raw, repo, lfsPath.rest, url);
    }
    const split = splitGitPath(url.pathname);
    if (!split) return c.text("gitedge: not a Git smart-HTTP path\n", 404);
    const repo = resolveRepo(split.path, deps.config);
    count(c);
    const rctx = c.var.scope.ctx;
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

  // After each request, the registry's news and (with a cap) a sweep of the store run in the
  // background when due.
  const handle = async (request: Request) => {
    const record: RequestRecord = {};
    try {
      return { response: await app.fetch(request, { record }), record };
    } finally {
      if (registry.due()) background(registry.flush());
      const sweep = evictor.sweepIfDue();
      if (sweep) background(sweep);
    }
  };
  const fetch = async (request: Request) => (await handle(request)).response;
  return { app, fetch, handle, metrics, registry, evictor, lfs };
}

/** What may follow `info/lfs/` (the LFS API's paths: `objects/batch`, `locks/<id>/unlock`). */
const LFS_REST = /^([A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*)?$/;

function repoFromEdgePath(c: Context, prefix: string, ctx: ProxyContext): RepoRef {
  const path = new URL(c.req.url).pathname.slice(prefix.length).replace(/\/+$/, "");
  return resolveRepo(path, ctx.deps.config);
}

/** Whether `authorization` carries the admin token (constant-time). */
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
