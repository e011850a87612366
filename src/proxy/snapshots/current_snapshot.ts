/**
 * The snapshot in force for a repository as a request finds it: its manifest, and whether every
 * pack it names is still in the store as published.
 */
import { type Manifest, manifestPacks } from "../core/manifest.ts";
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";

/** The snapshot in force as the upload-pack route found it. */
export interface SnapshotLookup {
  /** The manifest in force, or null when there is none. */
  manifest: Manifest | null;
  /** A pack it names is missing from the store, truncated or rewritten since publication. */
  missingPack: boolean;
}

/** No snapshot (or one not looked up: see `wantsSnapshot` in fetch_plan.ts). */
export const NO_SNAPSHOT: SnapshotLookup = { manifest: null, missingPack: false };

/** The snapshot in force, and whether one of its packs is missing from the store (or truncated). */
export async function currentSnapshot(
  ctx: ProxyContext,
  repo: RepoRef,
): Promise<SnapshotLookup> {
  const manifest = await ctx.deps.coordinator.manifest(repo);
  if (!manifest) return { manifest, missingPack: false };
  const packs = manifestPacks(manifest);
  const present = await Promise.all(packs.map((p) => ctx.deps.store.head(p.key)));
  // Missing, truncated, or rewritten since it was published (a flipped byte keeps the size but
  // not the store's version): never handed out again; the snapshot is rebuilt.
  const missingPack = present.some((info, i) =>
    info === null || info.size !== packs[i].size ||
    (packs[i].version !== undefined && info.version !== packs[i].version)
  );
  if (missingPack) ctx.metrics.inc("gitedge_snapshot_missing_packs_total");
  return { manifest, missingPack };
}
