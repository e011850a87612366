/**
 * The store's layout, in one place: every key the edge writes.
 *
 * - `repos/<id>/manifest.json`: the published snapshot's manifest (the builder's record).
 * - `repos/<id>/packs/<build>-<part>.pack` (and `.idx` beside it): the snapshot's packs.
 * - `repos/<id>/state.json`: the build counters (kept when the repository is evicted).
 * - `repos/<id>/tmp/<build>/`: a build's temporary objects; `repos/<id>/seeds/`: pack seeds.
 * - `cache/<id>/<key>.resp`: response cache entries.
 * - `registry/<id>.json`: what the edge knows of each repository.
 *
 * `<id>` is the repository's id (`repoId` in repo.ts).
 */

/** Every repository's objects live under this prefix. */
export const REPOS_PREFIX = "repos/";

/** Everything of the repository with id `repoId`. */
export function repoPrefix(repoId: string): string {
  return `${REPOS_PREFIX}${repoId}/`;
}

/** Where the manifest of the repository with id `repoId` lives. */
export function manifestKey(repoId: string): string {
  return `${repoPrefix(repoId)}manifest.json`;
}

/** Where pack `file` of the repository with id `repoId` lives in the store. */
export function packKey(repoId: string, file: string): string {
  return `${repoPrefix(repoId)}packs/${file}`;
}

/** Where the `.idx` of the pack stored under `packKey` lives: `.pack` replaced by `.idx`. */
export function indexKeyOf(packKey: string): string {
  return packKey.replace(/\.pack$/, ".idx");
}

/** The name, under {@link repoPrefix}, of the build counters eviction keeps. */
export const STATE_FILE = "state.json";

/** Where the snapshot counters of the repository with id `repoId` live in the store. */
export function stateKey(repoId: string): string {
  return `${repoPrefix(repoId)}${STATE_FILE}`;
}

/** Temporary objects of unfinished builds (of build `buildId`; of any when it is absent). */
export function tmpPrefix(repoId: string, buildId?: string): string {
  const tmp = `${repoPrefix(repoId)}tmp/`;
  return buildId === undefined ? tmp : `${tmp}${buildId}/`;
}

/** Where the pack seeds of the repository with id `repoId` are kept. */
export function seedsPrefix(repoId: string): string {
  return `${repoPrefix(repoId)}seeds/`;
}

/** Response cache entries live under this prefix. */
export const CACHE_PREFIX = "cache/";

/** The response cache entries of the repository with id `repoId`. */
export function cachePrefix(repoId: string): string {
  return `${CACHE_PREFIX}${repoId}/`;
}

/** Where the response cache entry `key` of the repository with id `repoId` lives. */
export function entryKey(repoId: string, key: string): string {
  return `${cachePrefix(repoId)}${key}.resp`;
}

/** The registry's records live under this prefix. */
export const REGISTRY_PREFIX = "registry/";

/** Where the registry's record of the repository with id `id` lives. */
export function registryKey(id: string): string {
  return `${REGISTRY_PREFIX}${id}.json`;
}
