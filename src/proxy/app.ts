/**
 * The edge app: a Hono application built from injected dependencies. It knows nothing of the
 * runtime it runs on; `edge/deno_server.ts` and `edge/worker.ts` feed it.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { EdgeDeps, RepoRef } from "./deps.ts";
import { Metrics } from "./metrics.ts";
import { AuthMemo } from "./auth_memo.ts";
import { RepoPathError, resolveRepo, splitGitPath } from "./repo.ts";
import { UrlSigner } from "./signing.ts";
import { OriginStatusError, OriginUnreachableError } from "./origin.ts";
import {
  handleInfoRefs,
  handleReceivePack,
  handleUploadPack,
  type ProxyContext,
} from "./git_routes.ts";
import { handlePackGet } from "./pack_routes.ts";
import { GitFormatError } from "../git/errors.ts";
import { ClientRequestError } from "./errors.ts";

export interface EdgeApp {
  app: Hono;
  fetch: (request: Request) => Promise<Response>;
  metrics: Metrics;
}

/**
 * Builds the app. `metrics` and `authMemo` are per process (or Worker isolate): pass them when
 * the app itself is built per request.
 */
export function createApp(
  deps: EdgeDeps,
  opts: { metrics?: Metrics; authMemo?: AuthMemo } = {},
): EdgeApp {
  const metrics = opts.metrics ?? new Metrics();
  const signer = new UrlSigner(deps.signingKey);
  const authMemo = opts.authMemo ?? new AuthMemo();
  const ctx: ProxyContext = { deps, metrics, signer, authMemo };
  const app = new Hono();

  app.onError((err, c) => errorResponse(c, err));
  app.notFound((c) => c.text("gitedge: not found\n", 404));

  app.get("/_edge/metrics", (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "metrics" });
    return c.text(metrics.render(), 200, { "content-type": "text/plain; version=0.0.4" });
  });

  app.on(["GET", "HEAD"], "/_edge/packs/:id/:file", (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "pack" });
    return handlePackGet(ctx, c.req.raw, c.req.param("id"), c.req.param("file"));
  });

  // With an admin token configured, the admin routes need it: status names a private
  // repository's tips, warm spends origin work.
  const adminOnly = (c: Context): Response | null =>
    isAdmin(c.req.header("authorization"), deps.config.adminToken)
      ? null
      : c.json({ error: "admin token required" }, 401);

  app.get("/_edge/status/*", async (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "status" });
    const refused = adminOnly(c);
    if (refused) return refused;
    const repo = repoFromEdgePath(c, "/_edge/status/", ctx);
    return c.json({ repo: repo.path, snapshot: await deps.coordinator.status(repo) });
  });

  app.post("/_edge/warm/*", async (c) => {
    metrics.inc("gitedge_requests_total", 1, { route: "warm" });
    const refused = adminOnly(c);
    if (refused) return refused;
    const repo = repoFromEdgePath(c, "/_edge/warm/", ctx);
    const originAuth = c.req.header("x-origin-authorization");
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
    if (split.endpoint === "info/refs" && c.req.method === "GET") {
      return await handleInfoRefs(ctx, c.req.raw, repo, url);
    }
    if (split.endpoint === "git-upload-pack" && c.req.method === "POST") {
      return await handleUploadPack(ctx, c.req.raw, repo, url);
    }
    if (split.endpoint === "git-receive-pack" && c.req.method === "POST") {
      return await handleReceivePack(ctx, c.req.raw, repo);
    }
    return c.text("gitedge: method not allowed\n", 405);
  });

  return { app, fetch: (request) => Promise.resolve(app.fetch(request)), metrics };
}

function repoFromEdgePath(c: Context, prefix: string, ctx: ProxyContext): RepoRef {
  const path = new URL(c.req.url).pathname.slice(prefix.length).replace(/\/+$/, "");
  return resolveRepo(path, ctx.deps.config);
}

/** Whether `authorization` carries the admin token (constant-time); true when none is set. */
function isAdmin(authorization: string | undefined, token: string | undefined): boolean {
  if (!token) return true;
  const given = new TextEncoder().encode(authorization ?? "");
  const want = new TextEncoder().encode(`Bearer ${token}`);
  let diff = given.length ^ want.length;
  for (let i = 0; i < want.length; i++) diff |= want[i] ^ (given[i] ?? 0);
  return diff === 0;
}

/** Maps errors to responses git shows to its user (text/plain bodies are printed by git). */
function errorResponse(c: Context, err: Error): Response {
  if (err instanceof RepoPathError) return c.text(`gitedge: ${err.message}\n`, err.status);
  if (err instanceof ClientRequestError) return c.text(`gitedge: ${err.message}\n`, err.status);
  if (err instanceof GitFormatError) return c.text(`gitedge: bad request: ${err.message}\n`, 400);
  if (err instanceof OriginUnreachableError) return c.text(`gitedge: ${err.message}\n`, 502);
  if (err instanceof OriginStatusError) return c.text(`gitedge: ${err.message}\n`, 502);
  console.error("gitedge: internal error:", err);
  return c.text(`gitedge: internal error: ${err.message}\n`, 500);
}
