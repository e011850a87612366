/**
 * `POST /_edge/purge/<repo>` (admin token): everything the edge stores for one repository goes
 * now: its manifest, snapshot packs and their indexes, seeds, unfinished builds' objects and its
 * response-cache answers, whatever their pins (URLs handed out for them stop working: that is the
 * point). The snapshot the coordinator still names has packs missing from then on, so no fetch,
 * bundle or URI is served from it; the next fetch goes to the origin and starts a full build
 * (docs/access.md: what an operator who purged a secret at the origin does at the edge).
 */
import type { PackStore } from "../../storage/store.ts";
import type { RepoRef } from "../core/repo.ts";
import { CACHE_PREFIX } from "../core/store_layout.ts";

/** The store prefixes holding `repo`'s objects. */
export function repoPrefixes(repo: RepoRef): string[] {
  return [`repos/${repo.id}/`, `${CACHE_PREFIX}${repo.id}/`];
}

/** Deletes every stored object of `repo`, the manifest first; returns how many and their bytes. */
export async function purgeRepo(
  store: PackStore,
  repo: RepoRef,
): Promise<{ objects: number; bytes: number }> {
  let objects = 0;
  let bytes = 0;
  for (const prefix of repoPrefixes(repo)) {
    const listed = await store.list(prefix);
    // The manifest first: from then on no reader takes this snapshot for whole.
    listed.sort((a, b) =>
      Number(b.key.endsWith("/manifest.json")) - Number(a.key.endsWith("/manifest.json"))
    );
    for (const obj of listed) {
      await store.delete(obj.key);
      objects++;
      bytes += obj.size;
    }
  }
  return { objects, bytes };
}
