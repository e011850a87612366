/**
 * The manifest: what a published snapshot is (its layers of packs, the tips each layer was built
 * for, the packs' indexes) and where it and its packs live in the store. The builder
 * (snapshot.ts) writes it; the request path reads it.
 */
import type { RepoRef } from "./repo.ts";
import { getBytes, type PackStore, type StoreVersion } from "../../storage/store.ts";
import { isObjectId } from "../../git/object_id.ts";
import { manifestKey } from "./store_layout.ts";

/** One self-contained pack of a snapshot. */
export interface SnapshotPack {
  /** The pack's trailing SHA-1 (hex): what `packfile-uris` announces. */
  hash: string;
  /** Where it lives in the store. */
  key: string;
  /** Size in bytes. */
  size: number;
  /** Number of objects. */
  objects: number;
  /**
   * The store's version of the object when it was published (`ObjectInfo.version`). A pack whose
   * version has changed since was rewritten by something other than the edge: the snapshot is
   * not advertised again until rebuilt. Absent in manifests written before versions existed.
   */
  version?: StoreVersion;
  /**
   * The pack's `.idx` (version 2), kept beside it in the store when the edge builds indexes
   * (`--pack-indexes`): a snapshot naming an index is published only after the index is stored.
   */
  index?: PackIndexRef;
}

/** A snapshot pack's index in the store. */
export interface PackIndexRef {
  key: string;
  size: number;
  /** The store's version of the index when it was published (as {@link SnapshotPack.version}). */
  version?: StoreVersion;
}

/** A published snapshot: written last, after every pack it names. */
export interface Manifest {
  /** The manifest's format version (a {@link StoreVersion} is something else). */
  version: 1;
  originUrl: string;
  /** Ref name to object id at build time (branches and tags). */
  tips: Record<string, string>;
  /** Layers, oldest first; each layer is a list of packs. */
  layers: SnapshotPack[][];
  /** ms since epoch. */
  builtAt: number;
  /** The repository's hash (`sha1` when absent); pack hashes in URIs use it too. */
  objectFormat?: "sha1" | "sha256";
  /**
   * What each layer was built for, parallel to `layers`: the tips it brought the snapshot to and
   * when. A layer holds the objects its tips reach less those the previous layer's tips reach, so
   * it is a bundle (src/proxy/bundles/bundle_list.ts). Absent in manifests written before, or when a layer
   * was added to such a manifest: then the edge offers no bundles until the next full build.
   */
  layerMeta?: LayerMeta[];
}

/** What one snapshot layer was built for (see {@link Manifest.layerMeta}). */
export interface LayerMeta {
  /** Ref name to object id when the layer was built. */
  tips: Record<string, string>;
  /** ms since epoch. */
  builtAt: number;
}

/** Every pack of a manifest, oldest layer first. */
export function manifestPacks(m: Manifest): SnapshotPack[] {
  return m.layers.flat();
}

/**
 * The manifest the builder left in the store for the repository with id `repoId`: null when there
 * is none, `"damaged"` when it is truncated, not JSON, not a manifest, or (with `originUrl`) not
 * one of that origin's repository.
 */
export async function storedManifest(
  store: PackStore,
  repoId: string,
  originUrl?: string,
): Promise<Manifest | "damaged" | null> {
  const bytes = await getBytes(store, manifestKey(repoId));
  if (!bytes) return null;
  let m: unknown;
  try {
    m = JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return "damaged";
  }
  if (!isManifest(m) || (originUrl !== undefined && m.originUrl !== originUrl)) return "damaged";
  return m;
}

/**
 * The manifest of `repo` the builder left in the store, or null when there is none or it is
 * damaged (see {@link storedManifest}): then the edge acts as if there were no snapshot, and the
 * next build writes a good one.
 */
export async function readManifest(store: PackStore, repo: RepoRef): Promise<Manifest | null> {
  const m = await storedManifest(store, repo.id, repo.originUrl);
  if (m === "damaged") {
    console.error(`gitedge: the stored manifest of ${repo.path} is damaged; it will be rebuilt`);
    return null;
  }
  return m;
}

export function isManifest(m: unknown): m is Manifest {
  if (typeof m !== "object" || m === null) return false;
  const r = m as Record<string, unknown>;
  const isPack = (p: unknown) => {
    const q = p as Record<string, unknown>;
    return typeof p === "object" && p !== null && typeof q.hash === "string" &&
      isObjectId(q.hash) && typeof q.key === "string" &&
      Number.isSafeInteger(q.size) && Number.isSafeInteger(q.objects) &&
      (q.version === undefined || typeof q.version === "string") &&
      (q.index === undefined || isIndexRef(q.index));
  };
  const isIndexRef = (i: unknown) => {
    const q = i as Record<string, unknown>;
    return typeof i === "object" && i !== null && typeof q.key === "string" &&
      Number.isSafeInteger(q.size) && (q.version === undefined || typeof q.version === "string");
  };
  return r.version === 1 && typeof r.originUrl === "string" && typeof r.tips === "object" &&
    r.tips !== null && Object.values(r.tips).every((v) => typeof v === "string") &&
    Array.isArray(r.layers) &&
    r.layers.every((layer) => Array.isArray(layer) && layer.every(isPack)) &&
    typeof r.builtAt === "number" && (r.layerMeta === undefined || isLayerMeta(r.layerMeta));
}

function isLayerMeta(m: unknown): boolean {
  return Array.isArray(m) && m.every((l) => {
    const q = l as Record<string, unknown>;
    return typeof l === "object" && l !== null && typeof q.builtAt === "number" &&
      typeof q.tips === "object" && q.tips !== null &&
      Object.values(q.tips).every((v) => typeof v === "string" && isObjectId(v));
  });
}
