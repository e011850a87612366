/**
 * What the edge app is built from. Every runtime (Deno server, Cloudflare Worker, tests) builds
 * these and hands them to `createApp` in `app.ts`; nothing in `src/proxy` reaches for globals.
 */
import type { PackSeeds } from "./pack_seeds.ts";
import type { PackStore } from "../storage/store.ts";
import type { Logger } from "./log.ts";

/** A repository behind the edge. */
export interface RepoRef {
  /** Stable storage id derived from `originUrl` (hex). */
  id: string;
  /** The origin's repository URL, without a trailing slash, e.g. `https://git.example/x/y.git`. */
  originUrl: string;
  /** The path the client used at the edge, e.g. `x/y.git` (or `host/x/y.git` in multi-origin mode). */
  path: string;
}

/** Credentials forwarded from a client to the origin. Held in memory only, never stored. */
export interface OriginAuth {
  headers: Record<string, string>;
}

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

export interface EdgeConfig {
  /** Single-origin mode: the origin base URL (edge path `/x/y.git` maps to `${origin}/x/y.git`). */
  origin?: string;
  /** Multi-origin mode: hosts that `/<host>/<path>` may reach over https. */
  allowHosts?: string[];
  /** Scheme used in multi-origin mode (https; tests use http). */
  multiOriginScheme?: "https" | "http";
  /** Base for pack URIs; derived from the request when absent. */
  publicUrl?: string;
  /** Max packs per snapshot layer. */
  chunks: number;
  /** Lifetime of a signed pack URL in seconds. */
  urlTtlSeconds: number;
  /** When set, `/_edge/warm` requires `Authorization: Bearer <adminToken>`. */
  adminToken?: string;
  /**
   * Largest protocol-v2 request the edge parses, in bytes (pushes and v0/v1 requests stream
   * through). Parsed requests together may hold 1.5 times this at once; beyond, 503.
   */
  maxRequestBytes: number;
  /** A request body the edge parses must arrive whole within this many seconds (else 408). */
  bodyTimeoutSeconds?: number;
  /**
   * How long the origin's acceptance of a credential (or of no credential: a public repository)
   * lets the edge answer fetches from its snapshot without the origin, in seconds; 0 turns that
   * off. Default {@link DEFAULT_EDGE_CONFIG}.
   */
  authTtlSeconds?: number;
  /**
   * Total size of the response cache (answers to fetches without `have`, in the store), bytes;
   * 0 turns it off. Default {@link DEFAULT_EDGE_CONFIG}.
   */
  responseCacheBytes?: number;
  /**
   * A plain full clone (no `packfile-uris`) whose wants are exactly the snapshot's tips gets one
   * pack streamed from the snapshot's packs instead of the origin's (snapshot_stream.ts).
   * Default on.
   */
  snapshotPlainClones?: boolean;
  /**
   * After a failed snapshot build, builds that clones ask for wait this many seconds, doubling
   * with each failure in a row up to 64 times (`/_edge/warm` does not wait); 0 turns it off.
   */
  buildBackoffSeconds?: number;
  /**
   * Keep a `.idx` beside each snapshot pack and serve it (`<pack>.idx`, same signature) to
   * clients that opt in to trusting the edge's indexes. Only runtimes that can build indexes
   * (the Deno server, with `git`) offer it. Default off.
   */
  packIndexes?: boolean;
  /**
   * How long after a v2 `info/refs` the `ls-refs` the edge sent the origin alongside it may
   * answer the same client's `ls-refs` (ls_refs_ahead.ts), in seconds; 0 turns it off.
   */
  lsRefsAheadSeconds?: number;
  /**
   * Most bytes of snapshots (packs, indexes, manifests) the store holds; beyond, the least
   * recently cloned repositories' snapshots are evicted (never packs whose signed URLs may still
   * be in use). 0: no cap. The response cache has its own size.
   */
  storeMaxBytes?: number;
}

/** The defaults every runtime starts from (the Deno server's flags, the Worker's vars). */
export const DEFAULT_EDGE_CONFIG: Readonly<
  Required<
    Pick<
      EdgeConfig,
      | "chunks"
      | "urlTtlSeconds"
      | "maxRequestBytes"
      | "authTtlSeconds"
      | "responseCacheBytes"
      | "bodyTimeoutSeconds"
      | "buildBackoffSeconds"
      | "lsRefsAheadSeconds"
      | "snapshotPlainClones"
    >
  >
> = {
  chunks: 4,
  urlTtlSeconds: 3600,
  // One `want` line is 50 bytes (74 with SHA-256): 16 MiB fits a clone of 335,000 refs.
  maxRequestBytes: 16 << 20,
  bodyTimeoutSeconds: 60,
  authTtlSeconds: 30,
  responseCacheBytes: 1 << 30,
  buildBackoffSeconds: 60,
  lsRefsAheadSeconds: 10,
  snapshotPlainClones: true,
};

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
