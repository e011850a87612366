/**
 * Serving snapshot packs: `GET|HEAD /_edge/packs/<repo id>/<file>?exp=…&sig=…`, byte for byte from
 * the store, with Range and immutable caching. Only signed, unexpired URLs are served. With
 * `packIndexes` on, `<name>.idx` serves the pack's index the same way, under the pack's signature.
 */
import type { ProxyContext } from "../core/context.ts";
import { packKey } from "../core/manifest.ts";
import { isIndexFile, verifyPackUrl } from "./pack_urls.ts";
import { noteBytesSaved } from "../ops/bytes_saved.ts";

export interface ParsedRange {
  offset: number;
  length: number;
}

/**
 * Parses a single `bytes=` range against an object of `size` bytes: the range, `"unsatisfiable"`,
 * or `undefined` when the header is absent or not a single byte range (serve the whole object).
 */
export function parseRange(
  header: string | null,
  size: number,
): ParsedRange | "unsatisfiable" | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return undefined;
  if (m[1] === "") {
    const suffix = Number(m[2]);
    if (suffix === 0) return "unsatisfiable";
    const offset = Math.max(0, size - suffix);
    return { offset, length: size - offset };
  }
  const start = Number(m[1]);
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || end < start) return "unsatisfiable";
  return { offset: start, length: end - start + 1 };
}

/** Whether `header` is `bytes=<size>-` for an object of `size` (> 0) bytes: a resume at the end. */
export function resumesAtEnd(header: string | null, size: number): boolean {
  const m = /^bytes=(\d+)-$/.exec(header?.trim() ?? "");
  return m !== null && size > 0 && Number(m[1]) === size;
}

/** A signed URL's check: servable (`ok`), or refused with `status` and a `message`. */
type UrlVerdict = { ok: true } | { ok: false; status: 403 | 404; message: string };

/**
 * The start of serving a signed URL (packs and bundles): `verify` judges the route's `id`, `file`
 * and the request's query at the clock's time in seconds. A refusal comes back as its plain-text
 * response; otherwise the verdict and that time.
 */
export async function signedRequest<V extends UrlVerdict>(
  ctx: ProxyContext,
  request: Request,
  id: string,
  file: string,
  verify: (
    signer: ProxyContext["signer"],
    id: string,
    file: string,
    params: URLSearchParams,
    nowSeconds: number,
  ) => Promise<V>,
): Promise<Response | { verdict: Extract<V, { ok: true }>; now: number }> {
  const now = Math.floor(ctx.deps.clock.now() / 1000);
  const verdict = await verify(ctx.signer, id, file, new URL(request.url).searchParams, now);
  if (!verdict.ok) return text(verdict.status, verdict.message);
  return { verdict: verdict as Extract<V, { ok: true }>, now };
}

export async function handlePackGet(
  ctx: ProxyContext,
  request: Request,
  id: string,
  file: string,
): Promise<Response> {
  const checked = await signedRequest(ctx, request, id, file, verifyPackUrl);
  if (checked instanceof Response) return checked;
  const { now, verdict: { expires: exp } } = checked;
  const index = isIndexFile(file);
  // Indexes are served only while the operator has them on (a store may keep older ones).
  if (index && !ctx.deps.config.packIndexes) return text(404, "this edge serves no pack indexes");
  const key = packKey(id, file);
  const info = await ctx.deps.store.head(key);
  if (!info) return text(404, index ? "no index for this pack" : "pack not found");
  const headers = new Headers({
    "content-type": index ? "application/octet-stream" : "application/x-git-packfile",
    "accept-ranges": "bytes",
    "etag": index ? `"${file}"` : `"${file.replace(/\.pack$/, "")}"`,
    "cache-control": `private, max-age=${Math.max(0, exp - now)}, immutable`,
  });
  const range = parseRange(request.headers.get("range"), info.size);
  if (resumesAtEnd(request.headers.get("range"), info.size)) {
    // git http-fetch resumes from the length of its `.temp` file, so a download cut off right
    // after the last byte comes back as `bytes=<size>-`. git >= 2.45 goes on after a 416 and
    // indexes the file it has; git 2.39 dies on it. Nothing remains to send: an empty 204 lets
    // every git index its complete file. Not cacheable: it is an answer to this range only.
    headers.set("content-range", `bytes */${info.size}`);
    headers.set("cache-control", "no-store");
    return new Response(null, { status: 204, headers });
  }
  if (range === "unsatisfiable") {
    headers.set("content-range", `bytes */${info.size}`);
    return new Response(null, { status: 416, headers });
  }
  const ifRange = request.headers.get("if-range");
  const useRange = range && (!ifRange || ifRange === headers.get("etag")) ? range : undefined;
  const status = useRange ? 206 : 200;
  const length = useRange ? useRange.length : info.size;
  headers.set("content-length", String(length));
  if (useRange) {
    headers.set(
      "content-range",
      `bytes ${useRange.offset}-${useRange.offset + useRange.length - 1}/${info.size}`,
    );
  }
  if (request.method === "HEAD") return new Response(null, { status, headers });
  const obj = await ctx.deps.store.get(key, useRange);
  if (!obj) return text(404, "pack not found");
  // Counted as handed out, not per chunk: the store's own stream goes to the response untouched,
  // so the runtime can send it without JavaScript on every chunk (a counting transform cost the
  // Deno server ~20% of its CPU per pack byte).
  ctx.metrics.inc("gitedge_cache_bytes_total", length);
  noteBytesSaved(ctx, id, length, "uri");
  return new Response(obj.body, { status, headers });
}

/** A plain-text answer `gitedge: <message>` with `status`. */
export function text(status: number, message: string): Response {
  return new Response(`gitedge: ${message}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}
