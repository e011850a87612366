/**
 * The access log and origin errors: one `request` record per request, written when its answer has
 * been handed over (`bytes` counted as they go; an answer of declared length, such as a pack, is
 * logged when its headers are ready, `bytes` being that length), and an `origin.error` record for
 * each origin call that fails or answers 5xx. Records of health probes and metrics scrapes are
 * `debug`, of 5xx answers `warn`, the others `info`.
 *
 * What the edge did comes from what the request's handling counted: each request gets its own view
 * of the shared metrics ({@link requestContext}) that notes the counters that tell (`answered`,
 * `rewrote`, a response-cache `hit`/`miss`, `passthrough` with its reason, a served `pack`), and
 * its own origin `fetch` that times the origin's answers.
 *
 * A `request` record: `method`, `route` (`info/refs`, `git-upload-pack`, `pack`, `status`, ...),
 * `repo` (the path as the client gave it, when the route names one), `status`, `bytes`,
 * `durationMs`, `action` (`answered`, `rewrote`, `cache-hit`, `passthrough`, `mirror`, `pack`,
 * `proxied`, `edge`), `reason` (why a fetch passed through), `packUris`, `cache` (`hit`/`miss`),
 * `mirror` (what the git mirror did: `hit`, `updated`, `fallback`, ...), `originMs`
 * (until the origin's headers, summed over its calls), `originStatus`, and `outcome` (`done`,
 * `cut`: the client went away, `error`: the body failed). Query strings (pack signatures) are
 * never logged, nor any header.
 */
import type { MiddlewareHandler } from "hono";
import { loggedOriginFetch } from "../origin/origin_log.ts";
import type { ProxyContext } from "../core/context.ts";
import type { Metrics } from "../core/metrics.ts";
import type { Logger } from "../core/log.ts";
import { splitGitPath } from "../core/repo.ts";

/** What one request's handling did, as far as the log tells. */
interface Notes {
  action?: string;
  reason?: string;
  cache?: string;
  packUris?: number;
  originMs?: number;
  originStatus?: number;
  /** What the git mirror did (`hit`, `updated`, `fallback`, `busy`, ...). */
  mirror?: string;
}

/** The counters that say what the edge did with a request. */
function note(notes: Notes, name: string, by: number, labels: Record<string, string>): void {
  switch (name) {
    case "gitedge_fetch_answered_total":
      notes.action = "answered";
      break;
    case "gitedge_fetch_rewrites_total":
      notes.action = "rewrote";
      break;
    case "gitedge_fetch_passthrough_total":
      notes.action = "passthrough";
      notes.reason = labels.reason;
      break;
    case "gitedge_response_cache_total":
      // A hit is the answer; a miss names it only if nothing else does (a passthrough counts first).
      notes.cache = labels.result;
      if (labels.result === "hit") notes.action = "cache-hit";
      else notes.action ??= `cache-${labels.result}`;
      break;
    case "gitedge_packfile_uris_total":
      notes.packUris = (notes.packUris ?? 0) + by;
      break;
    case "gitedge_cache_bytes_total":
      notes.action = "pack";
      break;
    case "gitedge_mirror_total":
      // The mirror answered (the plan's passthrough reason stays: why not the snapshot).
      notes.mirror = labels.result;
      if (labels.result === "hit" || labels.result === "updated") notes.action = "mirror";
      break;
  }
}

/** `metrics` as one request sees it: every call goes through, the telling counters are noted. */
function notingMetrics(metrics: Metrics, notes: Notes): Metrics {
  return new Proxy(metrics, {
    get(target, prop) {
      if (prop === "inc") {
        return (name: string, by = 1, labels: Record<string, string> = {}) => {
          note(notes, name, by, labels);
          target.inc(name, by, labels);
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** The route and repository a request's path names. */
export function routeOf(pathname: string): { route: string; repo?: string } {
  const edge = /^\/_edge\/([^/]+)(?:\/(.*))?$/.exec(pathname);
  if (edge) {
    const [, route, rest] = edge;
    if (route === "health" && rest) return { route: `health/${rest}` };
    const named = route === "status" || route === "warm";
    return named && rest ? { route, repo: rest.replace(/\/+$/, "") } : { route };
  }
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

const CONTEXTS = new WeakMap<Request, ProxyContext>();
const NOTED = new WeakMap<Response, Notes>();

/**
 * How many packfile URIs `response` (as the app returned it) handed out: a client given some is
 * in the middle of a clone and will download them next (the Deno server's drain waits for it).
 */
export function handedPackUris(response: Response): number {
  return NOTED.get(response)?.packUris ?? 0;
}

/** The context the request's handlers use: its own noting metrics and timed origin fetch. */
export function requestContext(request: Request, fallback: ProxyContext): ProxyContext {
  return CONTEXTS.get(request) ?? fallback;
}

/** The middleware writing the `request` records (and giving each request its context). */
export function requestLog(ctx: ProxyContext, log: Logger): MiddlewareHandler {
  const { clock } = ctx.deps;
  return async (c, next) => {
    const start = clock.now();
    const request = c.req.raw;
    const pathname = new URL(request.url).pathname;
    const { route, repo } = routeOf(pathname);
    const notes: Notes = {};
    const originFetch = loggedOriginFetch(
      ctx.deps.originFetch,
      log,
      clock,
      { repo, for: "request" },
      (ms, status) => {
        notes.originMs = (notes.originMs ?? 0) + ms;
        notes.originStatus = status;
      },
    );
    CONTEXTS.set(request, {
      ...ctx,
      metrics: notingMetrics(ctx.metrics, notes),
      deps: { ...ctx.deps, originFetch },
    });
    await next();
    const res = c.res;
    NOTED.set(res, notes);
    const emit = (bytes: number | undefined, outcome?: string) => {
      // Nothing telling counted: the origin answered it as is, or the edge itself did.
      const proxied = notes.originStatus !== undefined && !pathname.startsWith("/_edge/");
      const action = notes.action ?? (proxied ? "proxied" : "edge");
      log.log(level, "request", {
        method: request.method,
        route,
        repo,
        status: res.status,
        bytes,
        durationMs: clock.now() - start,
        action,
        reason: notes.reason,
        cache: notes.cache,
        mirror: notes.mirror,
        packUris: notes.packUris,
        originMs: notes.originMs,
        originStatus: notes.originStatus,
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
    NOTED.set(c.res, notes);
  };
}
