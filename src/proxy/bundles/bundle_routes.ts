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
import { recordOutcome } from "../core/request_record.ts";
import { storedManifest } from "../core/manifest.ts";
import { layerBundles, verifyBundleUrl } from "./bundle_list.ts";
import { encodeBundleHeader, joinedPack, joinedPackSize } from "../../git/bundle.ts";
import { prefixed } from "../core/streams.ts";
import { signedRequest, text } from "../downloads/pack_routes.ts";
import { rangedResponse } from "../downloads/ranged.ts";

export async function handleBundleGet(
  ctx: ProxyContext,
  request: Request,
  id: string,
  file: string,
): Promise<Response> {
  const checked = await signedRequest(ctx, request, id, file, verifyBundleUrl);
  if (checked instanceof Response) return checked;
  const { now, verdict } = checked;
  const stored = await storedManifest(ctx.deps.store, id);
  const manifest = stored === "damaged" ? null : stored;
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
  return rangedResponse(request, {
    size,
    contentType: "application/x-git-bundle",
    // A joined pack's trailer needs every byte before it: such bundles are served whole.
    ranges: single,
    etag: `"${verdict.name}"`,
    maxAgeSeconds: verdict.expires - now,
    gone: "bundle not found",
    open: async (range) => {
      if (!single) {
        const open = async (key: string) => {
          const obj = await ctx.deps.store.get(key);
          if (!obj) throw new Error("a snapshot pack vanished while its bundle was served");
          return obj.body;
        };
        return prefixed(
          header,
          joinedPack(
            bundle.packs.map((p) => ({
              size: p.size,
              objects: p.objects,
              open: () => open(p.key),
            })),
            format,
          ),
        );
      }
      // The header's part of the range, then the pack's part from the store.
      const start = range?.offset ?? 0;
      const end = start + (range?.length ?? size);
      const head = header.subarray(Math.min(start, header.length), Math.min(end, header.length));
      const packStart = Math.max(0, start - header.length);
      const packLength = end - header.length - packStart;
      if (packLength <= 0) return new Blob([head as Uint8Array<ArrayBuffer>]).stream();
      const obj = await ctx.deps.store.get(
        bundle.packs[0].key,
        range ? { offset: packStart, length: packLength } : undefined,
      );
      return obj ? prefixed(head, obj.body) : null;
    },
    served: (length) => {
      ctx.metrics.inc("gitedge_bundles_served_total");
      recordOutcome(ctx, { action: "pack", bytes: length });
      noteBytesSaved(ctx, id, length, "bundle");
    },
  });
}
