/**
 * Bytes the origin did not have to send, counted once for every path that serves a repository's
 * objects from the edge's store: a pack by URI, a plain clone streamed from the snapshot, a bundle,
 * an answer from the response cache, an answer or a snapshot layer packed from the git mirror
 * (`mirror`, `layer`), LFS objects (`lfs`). Counted per process in `gitedge_origin_bytes_saved_total{path}` and per
 * repository in the registry (the operator's page, `gitedge_repo_pack_bytes_total`).
 */
import type { Metrics } from "../core/metrics.ts";
import type { RepoRegistry } from "./repo_registry.ts";

/** How the edge spared the origin. */
export type SavedPath =
  | "uri"
  | "stream"
  | "bundle"
  | "response-cache"
  | "mirror"
  | "layer"
  | "lfs";

/** Counts `bytes` served from the store for the repository with id `repoId` by `path`. */
export function noteBytesSaved(
  ctx: { metrics: Metrics; registry?: RepoRegistry },
  repoId: string,
  bytes: number,
  path: SavedPath,
): void {
  if (!(bytes > 0)) return;
  ctx.metrics.inc("gitedge_origin_bytes_saved_total", bytes, { path });
  ctx.registry?.notePackBytes(repoId, bytes);
}
