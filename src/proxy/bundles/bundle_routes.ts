/**
 * Serving bundles (`GET|HEAD /_edge/bundles/<repo id>/<layer>.bundle?exp=…&sig=…`): a bundle
 * header the edge writes from the manifest, then the layer's pack. A layer of one pack is that
 * pack's stored bytes as they are; a layer of several self-contained packs becomes one pack
 * (src/git/bundle.ts `joinedPack`: their entries as stored, one header, one trailer hashed as it
 * streams). Whole only: git's bundle download asks for no range. A layer no longer in the
 * manifest (compacted since the list was handed out) is 404: git then fetches what it lacks.
 */
import { noteBytesSaved } from "../ops/bytes_saved.ts";
import type { ProxyContext } from "../core/context.ts";
import { isManifest, type Manifest, manifestKey } from "../core/manifest.ts";
import { getBytes } from "../../storage/store.ts";
import { layerBundles, verifyBundleUrl } from "./bundle_list.ts";
import { encodeBundleHeader, joinedPack, joinedPackSize } from "../../git/bundle.ts";
import { prefixed } from "../core/streams.ts";
import { parseRange, signedRequest, text } from "../downloads/pack_routes.ts";

export async function handleBundleGet(
  ctx: ProxyContext,
  request: Request,
  id: string,
  file: string,
): Promise<Response> {
  const checked = await signedRequest(ctx, request, id, file, verifyBundleUrl);
  if (checked instanceof Response) return checked;
  const { now, verdict } = checked;
  const manifest = await storedManifest(ctx, id);
  const bundle = manifest && layerBundles(manifest).find((b) => b.name === verdict.name);
  if (!bundle) return text(404, "bundle not found");
  const format = bundle.header.objectFormat;
  const header = encodeBundleHeader(bundle.header);
  const infos = await Promise.all(bundle.packs.map((p) => ctx.deps.store.head(p.key)));
  if (infos.some((info, i) => !info || info.size !== bundle.packs[i].size)) {
    return text(404, "bundle not found");
  }
  const packSize = bundle.packs.length === 1
    ? bundle.packs[0].size
    : joinedPackSize(bundle.packs, format);
  const size = header.length + packSize;
  const single = bundle.packs.length === 1;
  const headers = new Headers({
    "content-type": "application/x-git-bundle",
    // A joined pack's trailer needs every byte before it: such bundles are served whole.
    "accept-ranges": single ? "bytes" : "none",
    "etag": `"${verdict.name}"`,
    "cache-control": `private, max-age=${Math.max(0, verdict.expires - now)}, immutable`,
  });
  const asked = single ? parseRange(request.headers.get("range"), size) : undefined;
  if (asked === "unsatisfiable") {
    headers.set("content-range", `bytes */${size}`);
    return new Response(null, { status: 416, headers });
  }
  const ifRange = request.headers.get("if-range");
  const range = asked && (!ifRange || ifRange === headers.get("etag")) ? asked : undefined;
  const length = range ? range.length : size;
  headers.set("content-length", String(length));
  if (range) {
    headers.set(
      "content-range",
      `bytes ${range.offset}-${range.offset + range.length - 1}/${size}`,
    );
  }
  const status = range ? 206 : 200;
  if (request.method === "HEAD") return new Response(null, { status, headers });
  let body: ReadableStream<Uint8Array> | null;
  if (single) {
    // The header's part of the range, then the pack's part from the store.
    const start = range?.offset ?? 0;
    const end = start + length;
    const head = header.subarray(Math.min(start, header.length), Math.min(end, header.length));
    const packStart = Math.max(0, start - header.length);
    const packLength = end - header.length - packStart;
    const obj = packLength <= 0 ? null : await ctx.deps.store.get(
      bundle.packs[0].key,
      range ? { offset: packStart, length: packLength } : undefined,
    );
    if (packLength > 0 && !obj) return text(404, "bundle not found");
    body = obj ? prefixed(head, obj.body) : new Blob([head as Uint8Array<ArrayBuffer>]).stream();
  } else {
    const open = async (key: string) => {
      const obj = await ctx.deps.store.get(key);
      if (!obj) throw new Error("a snapshot pack vanished while its bundle was served");
      return obj.body;
    };
    body = prefixed(
      header,
      joinedPack(
        bundle.packs.map((p) => ({ size: p.size, objects: p.objects, open: () => open(p.key) })),
        format,
      ),
    );
  }
  ctx.metrics.inc("gitedge_bundles_served_total");
  ctx.metrics.inc("gitedge_cache_bytes_total", length);
  noteBytesSaved(ctx, id, length, "bundle");
  return new Response(body, { status, headers });
}

/** The manifest stored for the repository with id `id`, or null (none, or damaged). */
async function storedManifest(ctx: ProxyContext, id: string): Promise<Manifest | null> {
  const bytes = await getBytes(ctx.deps.store, manifestKey({ id, originUrl: "", path: "" }));
  if (!bytes) return null;
  try {
    const m: unknown = JSON.parse(new TextDecoder().decode(bytes));
    return isManifest(m) ? m : null;
  } catch {
    return null;
  }
}
