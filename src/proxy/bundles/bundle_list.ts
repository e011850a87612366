/**
 * The edge's bundle list (protocol v2 `bundle-uri`): one bundle per snapshot layer, under the
 * `creationToken` heuristic. A layer holds the objects its tips reach less those the previous
 * layer's tips reach, so it is a bundle whose refs are its tips and whose prerequisites are the
 * previous layer's tips; its token is the time it was built, so a client that recorded the token
 * of the newest bundle it applied downloads only the layers built since.
 *
 * Bundle URLs (`/_edge/bundles/<repo id>/<layer>.bundle?exp=…&sig=…`) are signed and expire like
 * pack URLs; `<layer>` is the name of the layer's first pack without `.pack`, unique per layer.
 */
import type { LayerMeta, Manifest, SnapshotPack } from "../core/manifest.ts";
import { expiryFor, type UrlSigner } from "../core/signing.ts";
import type { BundleHeader } from "../../git/bundle.ts";
import { concat, encodePkt, FLUSH_PKT } from "../../git/pktline.ts";

/** The app's route for bundles (Hono pattern): `:id` the repository id, `:file` the bundle. */
export const BUNDLE_ROUTE = "/_edge/bundles/:id/:file";

/** Where a repository's bundle list is, in git's config format: this, then the repository path. */
export const BUNDLE_LIST_PREFIX = "/_edge/bundle-list/";

const ID = /^[0-9a-f]{32}$/;
const FILE = /^([0-9a-z-]{1,100})\.bundle$/;

/** One layer as a bundle: its name, token, header and packs. */
export interface LayerBundle {
  name: string;
  creationToken: number;
  header: BundleHeader;
  packs: SnapshotPack[];
}

/** The name of the layer whose first pack is `pack`: that pack's file name less `.pack`. */
function layerName(pack: SnapshotPack): string | undefined {
  const file = pack.key.slice(pack.key.lastIndexOf("/") + 1);
  const m = /^([0-9a-z-]{1,100})\.pack$/.exec(file);
  return m?.[1];
}

/**
 * The manifest's layers as bundles, oldest first; empty when the manifest does not say what
 * each layer was built for (written before it did) or a layer's packs are not named as the
 * builder names them.
 */
export function layerBundles(manifest: Manifest): LayerBundle[] {
  const meta: LayerMeta[] | undefined = manifest.layerMeta;
  if (!meta || meta.length !== manifest.layers.length) return [];
  const objectFormat = manifest.objectFormat ?? "sha1";
  const out: LayerBundle[] = [];
  for (let i = 0; i < manifest.layers.length; i++) {
    const packs = manifest.layers[i];
    const name = packs.length > 0 ? layerName(packs[0]) : undefined;
    if (name === undefined) return [];
    out.push({
      name,
      creationToken: meta[i].builtAt,
      header: {
        objectFormat,
        prerequisites: i === 0 ? [] : [...new Set(Object.values(meta[i - 1].tips))],
        refs: meta[i].tips,
      },
      packs,
    });
  }
  return out;
}

/** The path of bundle `name` of the repository with id `repoId`. */
export function bundlePath(repoId: string, name: string): string {
  return `/_edge/bundles/${repoId}/${name}.bundle`;
}

/**
 * The `bundle-uri` answer for `bundles`: the list's `key=value` lines, each bundle's signed URL
 * under `base` valid for at least `ttlSeconds` from `nowSeconds`, and the flush.
 */
export async function bundleListAnswer(
  signer: UrlSigner,
  base: string,
  repoId: string,
  bundles: readonly LayerBundle[],
  nowSeconds: number,
  ttlSeconds: number,
): Promise<Uint8Array> {
  const lines = ["bundle.version=1", "bundle.mode=all", "bundle.heuristic=creationToken"];
  const exp = expiryFor(nowSeconds, ttlSeconds);
  for (const b of bundles) {
    const path = bundlePath(repoId, b.name);
    const sig = await signer.sign(path, exp);
    lines.push(`bundle.${b.name}.uri=${base}${path}?exp=${exp}&sig=${sig}`);
    // Keys as git's config writes them (lower case): git matches the protocol's keys exactly.
    lines.push(`bundle.${b.name}.creationtoken=${b.creationToken}`);
  }
  return concat([...lines.map((l) => encodePkt(l + "\n")), FLUSH_PKT]);
}

/** The same list as {@link bundleListAnswer}, as a file in git's config format. */
export async function bundleListConfig(
  signer: UrlSigner,
  base: string,
  repoId: string,
  bundles: readonly LayerBundle[],
  nowSeconds: number,
  ttlSeconds: number,
): Promise<string> {
  const lines = ["[bundle]", "\tversion = 1", "\tmode = all", "\theuristic = creationToken"];
  const exp = expiryFor(nowSeconds, ttlSeconds);
  for (const b of bundles) {
    const path = bundlePath(repoId, b.name);
    const sig = await signer.sign(path, exp);
    // Names and URLs hold only [0-9a-zA-Z_.:/?&=-]: nothing to escape inside the quotes.
    lines.push(`[bundle "${b.name}"]`);
    lines.push(`\turi = "${base}${path}?exp=${exp}&sig=${sig}"`);
    lines.push(`\tcreationToken = ${b.creationToken}`);
  }
  return lines.join("\n") + "\n";
}

/** The verdict on a bundle URL: the layer's name, or the status to refuse with. */
export type BundleUrlVerdict =
  | { ok: true; name: string; expires: number }
  | { ok: false; status: 403 | 404; message: string };

/** Whether the bundle URL with route parameters `id`, `file` and query `params` may be served. */
export async function verifyBundleUrl(
  signer: UrlSigner,
  id: string,
  file: string,
  params: URLSearchParams,
  nowSeconds: number,
): Promise<BundleUrlVerdict> {
  const m = FILE.exec(file);
  if (!ID.test(id) || !m) return { ok: false, status: 404, message: "no such bundle" };
  const exp = Number(params.get("exp"));
  const sig = params.get("sig") ?? "";
  if (!(await signer.verify(bundlePath(id, m[1]), exp, sig, nowSeconds))) {
    return { ok: false, status: 403, message: "bundle URL signature is invalid or expired" };
  }
  return { ok: true, name: m[1], expires: exp };
}
