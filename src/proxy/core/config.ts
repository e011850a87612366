/**
 * The edge's configuration: what each runtime reads (the Deno server's flags, the Worker's vars;
 * `settings.ts` holds the table) and hands to `createApp` in `EdgeDeps.config`.
 */
export interface EdgeConfig {
  /** Single-origin mode: the origin base URL (edge path `/x/y.git` maps to `${origin}/x/y.git`). */
  origin?: string;
  /** Multi-origin mode: hosts that `/<host>/<path>` may reach over https. */
  allowHosts?: string[];
  /** Scheme used in multi-origin mode (https; tests use http). */
  multiOriginScheme?: "https" | "http";
  /** Base for pack URIs; derived from the request when absent. */
  publicUrl?: string;
  /**
   * Single-origin mode: the base URL of the origin's Git LFS server when it is not the Git origin
   * (edge path `/x/y.git/info/lfs/…` goes to `${lfsOrigin}/x/y.git/info/lfs/…`); absent, LFS goes
   * to `<origin repository URL>/info/lfs`, where git-lfs itself looks.
   */
  lfsOrigin?: string;
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
   * Total size of the response cache (answers to clones' fetches, and to incremental fetches keyed
   * by their haves, in the store), bytes; 0 turns it off. Default {@link DEFAULT_EDGE_CONFIG}.
   */
  responseCacheBytes?: number;
  /**
   * A plain full clone (no `packfile-uris`) whose wants are exactly the snapshot's tips gets one
   * pack streamed from the snapshot's packs instead of the origin's (fetch/streamed_fetch.ts).
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
      | "snapshotPlainClones"
      | "bodyTimeoutSeconds"
      | "buildBackoffSeconds"
      | "lsRefsAheadSeconds"
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
  snapshotPlainClones: true,
  buildBackoffSeconds: 60,
  lsRefsAheadSeconds: 10,
};

/** The settings {@link DEFAULT_EDGE_CONFIG} gives a value to. */
export type DefaultedSetting = keyof typeof DEFAULT_EDGE_CONFIG;

/** An {@link EdgeConfig} with its defaults filled in: what the app reads. */
export type ResolvedEdgeConfig = EdgeConfig & Required<Pick<EdgeConfig, DefaultedSetting>>;

/** `config` with every setting it leaves unset (or undefined) at its default. */
export function withDefaults(config: EdgeConfig): ResolvedEdgeConfig {
  const resolved: ResolvedEdgeConfig = { ...DEFAULT_EDGE_CONFIG, ...config };
  // A key set to undefined in `config` spreads as undefined: put its default back.
  const filled: Record<DefaultedSetting, unknown> = resolved;
  for (const key of Object.keys(DEFAULT_EDGE_CONFIG) as DefaultedSetting[]) {
    filled[key] = config[key] ?? DEFAULT_EDGE_CONFIG[key];
  }
  return resolved;
}
