/**
 * Git LFS paths, keys and edge URLs in one place.
 *
 * - git-lfs derives its API from the remote URL: `<repo>.git/info/lfs/…` ({@link splitLfsPath}).
 * - LFS objects are stored once by content, whichever repositories name them:
 *   `lfs/objects/<oid[0:2]>/<oid[2:4]>/<oid>` ({@link lfsObjectKey}).
 * - A download the origin granted is handed out as a signed, expiring edge URL
 *   `/_edge/lfs/<repo id>/<oid>?r=<repo path>&size=…&c=…&exp=…&sig=…` ({@link signedLfsUrl}):
 *   the signature covers the repository, the oid, its size and the caller's tag (a keyed digest
 *   of the credential that was granted it, never the credential itself).
 */
import { expiryFor, type UrlSigner } from "../core/signing.ts";

/** The app's route for LFS objects (Hono pattern): `:id` the repository id, `:oid` the object. */
export const LFS_OBJECT_ROUTE = "/_edge/lfs/:id/:oid";

/** Where LFS objects live in the store. */
export const LFS_PREFIX = "lfs/objects/";

const ID = /^[0-9a-f]{32}$/;
/** An LFS oid: SHA-256 of the content, 64 lower-case hex digits. */
export const OID = /^[0-9a-f]{64}$/;
const TAG = /^[A-Za-z0-9_-]{22}$/;

/** The store key of the LFS object `oid` (an {@link OID}). */
export function lfsObjectKey(oid: string): string {
  if (!OID.test(oid)) throw new Error(`not an LFS oid: ${JSON.stringify(oid)}`);
  return `${LFS_PREFIX}${oid.slice(0, 2)}/${oid.slice(2, 4)}/${oid}`;
}

/**
 * Splits `/x/y.git/info/lfs/objects/batch` into the repository path (`x/y.git`) and what follows
 * `info/lfs/` (`objects/batch`); undefined for any other path.
 */
export function splitLfsPath(pathname: string): { path: string; rest: string } | undefined {
  const at = pathname.indexOf("/info/lfs");
  if (at <= 1) return undefined;
  const after = pathname.slice(at + "/info/lfs".length);
  if (after !== "" && !after.startsWith("/")) return undefined;
  return { path: pathname.slice(1, at), rest: after.replace(/^\/+/, "") };
}

/** The path of LFS object `oid` handed out for the repository with id `repoId`. */
export function lfsObjectPath(repoId: string, oid: string): string {
  return `/_edge/lfs/${repoId}/${oid}`;
}

/**
 * The caller's tag: a keyed digest (22 base64url characters) of the credential a request carried
 * (`authorization`, or none), so a URL and a remembered grant name their caller without holding
 * the credential.
 */
export async function callerTag(signer: UrlSigner, authorization: string | null): Promise<string> {
  const mac = await signer.sign(`lfs-caller\n${authorization ?? ""}`, 0);
  return mac.slice(0, 22);
}

function signed(path: string, repoPath: string, size: number, tag: string): string {
  return `${path}\n${repoPath}\n${size}\n${tag}`;
}

/** The signed URL under `base` of object `oid` of `size` bytes granted to the caller `tag`. */
export async function signedLfsUrl(
  signer: UrlSigner,
  base: string,
  repo: { id: string; path: string },
  oid: string,
  size: number,
  tag: string,
  nowSeconds: number,
  ttlSeconds: number,
): Promise<{ href: string; expires: number }> {
  const path = lfsObjectPath(repo.id, oid);
  const exp = expiryFor(nowSeconds, ttlSeconds);
  const sig = await signer.sign(signed(path, repo.path, size, tag), exp);
  const r = encodeURIComponent(repo.path);
  return {
    href: `${base}${path}?r=${r}&size=${size}&c=${tag}&exp=${exp}&sig=${sig}`,
    expires: exp,
  };
}

/** The verdict on an LFS object URL: what it grants, or the status to refuse with. */
export type LfsUrlVerdict =
  | {
    ok: true;
    expires: number;
    size: number;
    tag: string;
    oid: string;
    repoId: string;
    /** The repository's path at the edge, as the batch request named it. */
    repoPath: string;
  }
  | { ok: false; status: 403 | 404; message: string };

/**
 * Whether the LFS object URL with route parameters `id` and `oid` and query `params` may be served
 * at `nowSeconds`: 404 for a path that names no object, 403 for a signature that is missing,
 * invalid, for another object, size, caller or expiry, or expired.
 */
export async function verifyLfsUrl(
  signer: UrlSigner,
  id: string,
  oid: string,
  params: URLSearchParams,
  nowSeconds: number,
): Promise<LfsUrlVerdict> {
  if (!ID.test(id) || !OID.test(oid)) {
    return { ok: false, status: 404, message: "no such LFS object" };
  }
  const sizeText = params.get("size") ?? "";
  const size = /^\d{1,15}$/.test(sizeText) ? Number(sizeText) : NaN;
  const tag = params.get("c") ?? "";
  const repoPath = params.get("r") ?? "";
  const exp = Number(params.get("exp"));
  const sig = params.get("sig") ?? "";
  const valid = Number.isSafeInteger(size) && TAG.test(tag) && repoPath.length <= 1024 &&
    await signer.verify(signed(lfsObjectPath(id, oid), repoPath, size, tag), exp, sig, nowSeconds);
  if (!valid) return { ok: false, status: 403, message: "LFS URL signature is invalid or expired" };
  return { ok: true, expires: exp, size, tag, oid, repoId: id, repoPath };
}
