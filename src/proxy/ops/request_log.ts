/**
 * The access log and origin errors: one `request` record per request, written when its answer has
 * been handed over (`bytes` counted as they go; an answer of declared length, such as a pack, is
 * logged when its headers are ready, `bytes` being that length), and an `origin.error` record for
 * each origin call that fails or answers 5xx. Records of health probes and metrics scrapes are
 * `debug`, of 5xx answers `warn`, the others `info`.
 *
 * What the edge did comes from the request's record (core/request_record.ts): each request gets
 * its own context ({@link RequestScope}, in Hono's `c.var`) whose record the handlers write their
 * outcomes into, and whose origin `fetch` times the origin's answers.
 *
 * A `request` record: `method`, `route` (`info/refs`, `git-upload-pack`, `pack`, `status`, ...),
 * `repo` (the path as the client gave it, when the route names one), `status`, `bytes`,
 * `durationMs`, `action` (`answered`, `rewrote`, `cache-hit`, `passthrough`, `mirror`, `pack`,
 * `proxied`, `edge`; for LFS `lfs-rewrote`, `lfs-hit`, `lfs-miss`, `lfs-origin-error`), `reason`
 * (why a fetch passed through), `packUris`, `cache` (`hit`/`miss`), `mirror` (what the git
 * mirror did: `hit`, `updated`, `fallback`, ...), `originMs`
 * (until the origin's headers, summed over its calls), `originStatus`, and `outcome` (`done`,
 * `cut`: the client went away, `error`: the body failed). Query strings (pack signatures) are
 * never logged, nor any header.
 */
import type { MiddlewareHandler } from "hono";
import { loggedOriginFetch } from "../origin/origin_log.ts";
import type { ProxyContext } from "../core/context.ts";
import type { RequestRecord } from "../core/request_record.ts";
import type { Logger } from "../core/log.ts";
import { splitGitPath } from "../core/repo.ts";
import { splitLfsPath } from "../lfs/lfs_urls.ts";

/** The edge's own routes under `/_edge/` by their first segment, and their labels. */
const EDGE_ROUTES: Record<string, string> = {
  packs: "pack",
  bundles: "bundle",
  "bundle-list": "bundle-list",
  metrics: "metrics",
  repos: "repos",
  status: "status",
  warm: "warm",
  purge: "purge",
  lfs: "lfs-object",
};

/**
 * The route label (a bounded set: the log's `route`, the metrics' `route`) and the repository a
 * request's path names: a Git endpoint (`info/refs`, `git-upload-pack`, ...), `pack`, `bundle`,
 * `bundle-list`, `page`, `repos`, `status`, `warm`, `purge`, `metrics`, `health/live`, `health/ready`,
 * `lfs` (the LFS API), `lfs-object`, or `other`.
 */
export function routeOf(pathname: string): { route: string; repo?: string } {
  if (pathname === "/_edge" || pathname === "/_edge/") return { route: "page" };
  const edge = /^\/_edge\/([^/]+)(?:\/(.*))?$/.exec(pathname);
  if (edge) {
    const [, first, rest] = edge;
    if (first === "health" && (rest === "live" || rest === "ready")) {
      return { route: `health/${rest}` };
    }
    const route = EDGE_ROUTES[first] ?? "other";
    const named = route === "status" || route === "warm" || route === "purge";
    return named && rest ? { route, repo: rest.replace(/\/+$/, "") } : { route };
  }
  const lfs = splitLfsPath(pathname);
  if (lfs) return { route: "lfs", repo: lfs.path };
  const split = splitGitPath(pathname);
  return split ? { route: split.endpoint, repo: split.path } : { route: "other" };
}

/** `body` passed on as read; `onEnd` hears how many bytes went and how it ended, once. */
function counted(
  body: ReadableStream<Uint8Array>,
  onEnd: (bytes: number, outcome: "done" | "cut" | "error") => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let bytes = 0;
  let ended = false;
  const end = (outcome: "done" | "cut" | "error") => {
    if (ended) return;
    ended = true;
    onEnd(bytes, outcome);
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        end("error");
        controller.error(error);
        return;
      }
      if (chunk.done) {
        end("done");
        controller.close();
        return;
      }
      bytes += chunk.value.byteLength;
      controller.enqueue(chunk.value);
    },
    async cancel(reason) {
      end("cut");
      await reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/** A request's own context, in Hono's `c.var.scope`. */
export interface RequestScope {
  /** The shared context with this request's record and timed origin fetch. */
  ctx: ProxyContext;
  /** Its route label and repository ({@link routeOf}). */
  route: string;
  repo?: string;
}

/**
 * The app's Hono environment: `c.var.scope` the request's context; `c.env.record`, when the caller
 * passes one, the record the request's handling writes (createApp's `handle` reads it back).
 */
export interface EdgeEnv {
  Bindings: { record?: RequestRecord } | undefined;
  Variables: { scope: RequestScope };
}

/**
 * The middleware giving each request its context ({@link RequestScope}) and writing its `request`
 * record, and the request duration histogram, by route.
 */
export function requestLog(ctx: ProxyContext, log: Logger): MiddlewareHandler<EdgeEnv> {
  const { clock } = ctx.deps;
  return async (c, next) => {
    const start = clock.now();
    const started = performance.now();
    const request = c.req.raw;
    const pathname = new URL(request.url).pathname;
    const { route, repo } = routeOf(pathname);
    const record: RequestRecord = c.env?.record ?? {};
    const originFetch = loggedOriginFetch(
      ctx.deps.originFetch,
      log,
      clock,
      { repo, for: "request" },
      (ms, status) => {
        record.originMs = (record.originMs ?? 0) + ms;
        record.originStatus = status;
      },
    );
    c.set("scope", { ctx: { ...ctx, record, deps: { ...ctx.deps, originFetch } }, route, repo });
    try {
      await next();
    } finally {
      // Each request is timed to its response's headers.
      const seconds = (performance.now() - started) / 1000;
      ctx.metrics.observe("gitedge_request_duration_seconds", seconds, { route });
    }
    const res = c.res;
    const emit = (bytes: number | undefined, outcome?: string) => {
      // No outcome recorded: the origin answered it as is, or the edge itself did.
      const proxied = record.originStatus !== undefined && !pathname.startsWith("/_edge/");
      const action = record.action ?? (proxied ? "proxied" : "edge");
      log.log(level, "request", {
        method: request.method,
        route,
        repo,
        status: res.status,
        bytes,
        durationMs: clock.now() - start,
        action,
        reason: record.reason,
        cache: record.cache,
        mirror: record.mirror,
        packUris: record.packUris,
        originMs: record.originMs,
        originStatus: record.originStatus,
        outcome,
      });
    };
    // Probes and scrapes come every few seconds: their records are debug.
    const level = route.startsWith("health") || route === "metrics"
      ? "debug"
      : res.status >= 500
      ? "warn"
      : "info";
    if (!log.enabled(level)) return;
    const length = res.headers.get("content-length");
    if (res.body === null || length !== null || request.method === "HEAD") {
      emit(request.method === "HEAD" ? 0 : Number(length ?? 0));
      return;
    }
    c.res = new Response(counted(res.body, emit), res);
  };
}
