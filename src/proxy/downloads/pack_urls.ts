/**
 * Pack URLs, in one place: the route the app serves snapshot packs on
 * (`/_edge/packs/<repo id>/<file>?exp=…&sig=…`), building a signed, expiring URL for a pack handed
 * out in a `packfile-uris` section, and verifying one when it comes back.
 *
 * A pack's index, where the edge keeps one (`--pack-indexes`), is served at the pack's URL with
 * the path's `.pack` replaced by `.idx`, query kept: the pack's signature authorises both.
 */
import { expiryFor, type UrlSigner } from "../core/signing.ts";

/** The app's route for packs (Hono pattern): `:id` the repository id, `:file` the pack file. */
export const PACK_ROUTE = "/_edge/packs/:id/:file";

const ID = /^[0-9a-f]{32}$/;
const FILE = /^[0-9a-z-]+\.(pack|idx)$/;

/** The path of pack `file` of the repository with id `repoId`. */
export function packPath(repoId: string, file: string): string {
  return `/_edge/packs/${repoId}/${file}`;
}

/**
 * The signed URL under `base` (the edge's public origin, no trailing slash) of the pack stored
 * under `key` (its last path segment is the file name) of the repository with id `repoId`, valid
 * for at least `ttlSeconds` from `nowSeconds` (the expiry is bucketed, see {@link expiryFor}).
 */
export async function signedPackUrl(
  signer: UrlSigner,
  base: string,
  repoId: string,
  key: string,
  nowSeconds: number,
  ttlSeconds: number,
): Promise<string> {
  const path = packPath(repoId, key.slice(key.lastIndexOf("/") + 1));
  const exp = expiryFor(nowSeconds, ttlSeconds);
  const sig = await signer.sign(path, exp);
  return `${base}${path}?exp=${exp}&sig=${sig}`;
}

/** The verdict on a pack URL: servable until `expires` (seconds), or the status to refuse with. */
export type PackUrlVerdict =
  | { ok: true; expires: number }
  | { ok: false; status: 403 | 404; message: string };

/** Whether `file` (a route's `:file`) names a pack's index rather than a pack. */
export function isIndexFile(file: string): boolean {
  return file.endsWith(".idx");
}

/** The pack whose index is `file` (`x.idx` to `x.pack`); a pack's own name unchanged. */
export function packFileOf(file: string): string {
  return isIndexFile(file) ? `${file.slice(0, -".idx".length)}.pack` : file;
}

/**
 * Whether the pack URL with route parameters `id` and `file` and query `params` may be served at
 * `nowSeconds`: 404 for a path that names no pack, 403 for a signature that is missing, invalid,
 * for another path or expiry, or expired. An index (`x.idx`) is authorised by its pack's
 * (`x.pack`) signature.
 */
export async function verifyPackUrl(
  signer: UrlSigner,
  id: string,
  file: string,
  params: URLSearchParams,
  nowSeconds: number,
): Promise<PackUrlVerdict> {
  if (!ID.test(id) || !FILE.test(file)) return { ok: false, status: 404, message: "no such pack" };
  const exp = Number(params.get("exp"));
  const sig = params.get("sig") ?? "";
  if (!(await signer.verify(packPath(id, packFileOf(file)), exp, sig, nowSeconds))) {
    return { ok: false, status: 403, message: "pack URL signature is invalid or expired" };
  }
  return { ok: true, expires: exp };
}
