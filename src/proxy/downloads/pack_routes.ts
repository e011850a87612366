/**
 * Serving snapshot packs: `GET|HEAD /_edge/packs/<repo id>/<file>?exp=…&sig=…`, byte for byte from
 * the store, with Range and immutable caching. Only signed, unexpired URLs are served. With
 * `packIndexes` on, `<name>.idx` serves the pack's index the same way, under the pack's signature.
 */
import type { ProxyContext } from "../core/context.ts";
import { recordOutcome } from "../core/request_record.ts";
import { packKey } from "../core/store_layout.ts";
import { isIndexFile, verifyPackUrl } from "./pack_urls.ts";
import { rangedResponse } from "./ranged.ts";
import { noteBytesSaved } from "../ops/bytes_saved.ts";

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
  return rangedResponse(request, {
    size: info.size,
    contentType: index ? "application/octet-stream" : "application/x-git-packfile",
    etag: index ? `"${file}"` : `"${file.replace(/\.pack$/, "")}"`,
    maxAgeSeconds: exp - now,
    ranges: true,
    emptyResumeAtEnd: true,
    open: async (range) => (await ctx.deps.store.get(key, range))?.body ?? null,
    gone: "pack not found",
    // Counted as handed out, not per chunk: the store's own stream goes to the response
    // untouched, so the runtime can send it without JavaScript on every chunk (a counting
    // transform cost the Deno server ~20% of its CPU per pack byte).
    served: (length) => {
      recordOutcome(ctx, { action: "pack", bytes: length });
      noteBytesSaved(ctx, id, length, "uri");
    },
  });
}

/** A plain-text answer `gitedge: <message>` with `status`. */
export function text(status: number, message: string): Response {
  return new Response(`gitedge: ${message}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}
