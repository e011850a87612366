/**
 * What the edge app is built from. Every runtime (Deno server, Cloudflare Worker, tests) builds
 * these and hands them to `createApp` in `app.ts`; nothing in `src/proxy` reaches for globals.
 */
import type { PackSeeds } from "./pack_seeds.ts";
import type { PackStore } from "../storage/store.ts";
import type { Logger } from "./log.ts";
import type { OriginAuth, RepoRef } from "./repo.ts";
import type { EdgeConfig } from "./config.ts";

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
  version?: string;
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
  version?: string;
}

/** A published snapshot: written last, after every pack it names. */
export interface Manifest {
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
   * it is a bundle (src/proxy/bundle_list.ts). Absent in manifests written before, or when a layer
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

export type SnapshotState = "none" | "building" | "ready";

export interface SnapshotStatus {
  state: SnapshotState;
  tips: string[];
  packs: { hash: string; bytes: number }[];
  builtAt: number | null;
  builds: number;
  lastError: string | null;
  /** When the last build failed (ms since epoch), or null. */
  failedAt?: number | null;
  /**
   * How the last published build went where builds run across invocations (Workers): how many
   * invocations it took and the most subrequests one of them made.
   */
  lastBuild?: {
    invocations: number;
    maxSubrequests: number;
    startedAt: number;
    finishedAt?: number;
  };
  /** A build carried across invocations that is under way: its next step and packs written. */
  pending?: { next: string; packsWritten: number; invocations: number };
  /** After failed builds: when a clone may start one again (ms since epoch); else null. */
  retryAt?: number | null;
}

/** What a request for a build was based on. */
export interface ScheduleBasis {
  /** `builtAt` of the manifest the caller saw (null: it saw none). */
  builtAt: number | null;
  /** The caller found that snapshot unusable (a pack missing): build afresh, not a layer on it. */
  rebuild?: boolean;
}

/**
 * What the app asks about a repository's snapshot: the manifest in force, its status, and builds
 * (single-flight per repository). `InProcessCoordinator` implements it in process memory (Deno),
 * the Worker's `DurableObjectCoordinator` with one Durable Object per repository.
 */
export interface SnapshotCoordinator {
  /** The ready manifest, or null. Cheap: called on every fetch. */
  manifest(repo: RepoRef): Promise<Manifest | null>;
  status(repo: RepoRef): Promise<SnapshotStatus>;
  /**
   * Starts a build or refresh in the background unless one runs; never waits for it. With a
   * `basis`, nothing starts if the snapshot in force is no longer the one the caller judged.
   */
  schedule(repo: RepoRef, auth: OriginAuth, basis?: ScheduleBasis): Promise<void>;
  /**
   * Builds or refreshes now (joining a running build) and resolves when it is ready; with
   * `rebuild`, a fresh build rather than a layer on the snapshot in force (the caller found one
   * of its packs missing or damaged).
   */
  warm(repo: RepoRef, auth: OriginAuth, opts?: { rebuild?: boolean }): Promise<SnapshotStatus>;
}

export type OriginFetch = (request: Request) => Promise<Response>;

export interface Clock {
  now(): number;
}

export interface EdgeDeps {
  store: PackStore;
  coordinator: SnapshotCoordinator;
  originFetch: OriginFetch;
  clock: Clock;
  /** HMAC key for signing pack URLs. */
  signingKey: Uint8Array;
  config: EdgeConfig;
  /** Background work that must outlive the response (Workers: `ctx.waitUntil`). */
  waitUntil?: (p: Promise<unknown>) => void;
  /** Where the request log and origin errors go (`src/proxy/log.ts`); none: not logged. */
  log?: Logger;
  /** True once the edge drains (stops taking work): readiness answers 503. */
  draining?: () => boolean;
  /**
   * Where clones' pass-through answers seed first builds (pack_seeds.ts); the same instance as
   * the snapshot builder's. Absent where builds run elsewhere (Workers).
   */
  packSeeds?: PackSeeds;
}
