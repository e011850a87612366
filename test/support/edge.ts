/**
 * Starting an edge under test. The end-to-end suite (`test/proxy/edge_suite.ts`) takes any
 * `EdgeFactory`, so the same cases run against the Deno server and the Worker in workerd.
 */
import { startDenoEdge } from "../../edge/deno/server.ts";
import type { EdgeConfig } from "../../src/proxy/core/config.ts";

export interface EdgeUnderTestOptions {
  /** Origin base URL (single-origin mode); omit for multi-origin mode with `allowHosts`. */
  origin?: string;
  /** Multi-origin mode: hosts reachable as `/<host>/<path>` (over http in tests). */
  allowHosts?: string[];
  chunks?: number;
  urlTtlSeconds?: number;
  adminToken?: string;
  maxRequestBytes?: number;
  /** See `EdgeConfig.buildBackoffSeconds`. */
  buildBackoffSeconds?: number;
  /** See `EdgeConfig.bodyTimeoutSeconds`. */
  bodyTimeoutSeconds?: number;
  /** See `EdgeConfig.authTtlSeconds`. */
  authTtlSeconds?: number;
  /** See `EdgeConfig.responseCacheBytes`. */
  responseCacheBytes?: number;
  /** Base URL put in packfile URIs instead of the edge's own (e.g. a relay in front of it). */
  publicUrl?: string;
  /** See `EdgeConfig.packIndexes` (the Deno server only). */
  packIndexes?: boolean;
  /** See `EdgeConfig.lsRefsAheadSeconds`. */
  lsRefsAheadSeconds?: number;
  /** See `EdgeConfig.snapshotPlainClones`. */
  snapshotPlainClones?: boolean;
}

export interface EdgeUnderTest extends AsyncDisposable {
  /** Runtime name, for test names. */
  runtime: string;
  url: string;
  /** Deletes a stored object by key (fault injection: "a pack deleted from the store"). */
  deleteStored(key: string): Promise<void>;
  /** Overwrites a stored object in place (fault injection: "a damaged pack or manifest"). */
  writeStored(key: string, bytes: Uint8Array): Promise<void>;
  /** Lists stored keys under a prefix. */
  listStored(prefix: string): Promise<string[]>;
  /** The bytes of a stored object. */
  readStored(key: string): Promise<Uint8Array>;
  /**
   * Failures of background snapshot builds so far (messages): on Deno from the server's hook, on
   * the Worker from workerd's log.
   */
  buildErrors?: string[];
  /**
   * Resolves once the background builds requests have started are over: on Deno when they are
   * (event-driven); on the Worker, whose Durable Object cannot be watched from outside, once
   * `/_edge/status/<repo>` shows no build running and `done(status)` holds.
   */
  settled(repo: string, done: (status: Record<string, unknown>) => boolean): Promise<void>;
  stop(): Promise<void>;
}

export type EdgeFactory = (opts: EdgeUnderTestOptions) => Promise<EdgeUnderTest>;

/**
 * The edge configuration `opts` asks for, the same for every runtime: multi-origin mode over http
 * (test origins are plain HTTP), 3 packs per layer and hour-long URLs unless set.
 */
export function edgeConfigFor(opts: EdgeUnderTestOptions): Partial<EdgeConfig> {
  return {
    origin: opts.origin,
    allowHosts: opts.allowHosts,
    multiOriginScheme: opts.allowHosts ? "http" : undefined,
    chunks: opts.chunks ?? 3,
    urlTtlSeconds: opts.urlTtlSeconds ?? 3600,
    adminToken: opts.adminToken,
    ...(opts.maxRequestBytes ? { maxRequestBytes: opts.maxRequestBytes } : {}),
    ...(opts.authTtlSeconds !== undefined ? { authTtlSeconds: opts.authTtlSeconds } : {}),
    ...(opts.bodyTimeoutSeconds ? { bodyTimeoutSeconds: opts.bodyTimeoutSeconds } : {}),
    ...(opts.buildBackoffSeconds !== undefined
      ? { buildBackoffSeconds: opts.buildBackoffSeconds }
      : {}),
    ...(opts.responseCacheBytes !== undefined
      ? { responseCacheBytes: opts.responseCacheBytes }
      : {}),
    ...(opts.publicUrl ? { publicUrl: opts.publicUrl } : {}),
    ...(opts.packIndexes ? { packIndexes: true } : {}),
    ...(opts.lsRefsAheadSeconds !== undefined
      ? { lsRefsAheadSeconds: opts.lsRefsAheadSeconds }
      : {}),
    ...(opts.snapshotPlainClones !== undefined
      ? { snapshotPlainClones: opts.snapshotPlainClones }
      : {}),
  };
}

/** The Deno server with a filesystem store in a fresh temp dir. */
export const denoEdgeFactory: EdgeFactory = async (opts) => {
  const store = await Deno.makeTempDir({ prefix: "gitedge-store-" });
  const buildErrors: string[] = [];
  const edge = await startDenoEdge({
    store,
    port: 0,
    config: edgeConfigFor(opts),
    onBuildError: (path, err) => {
      buildErrors.push(`${path}: ${err instanceof Error ? err.message : String(err)}`);
    },
  });
  const stop = async () => {
    await edge.stop();
    await Deno.remove(store, { recursive: true }).catch(() => {});
  };
  return {
    runtime: "deno",
    url: edge.url,
    buildErrors,
    settled: () => edge.idle(),
    deleteStored: (key) => Deno.remove(`${store}/${key}`),
    writeStored: async (key, bytes) => {
      await Deno.mkdir(`${store}/${key}`.replace(/\/[^/]*$/, ""), { recursive: true });
      await Deno.writeFile(`${store}/${key}`, bytes);
    },
    readStored: (key) => Deno.readFile(`${store}/${key}`),
    listStored: async (prefix) => {
      const out: string[] = [];
      const walk = async (dir: string, rel: string) => {
        for await (const e of Deno.readDir(dir)) {
          const k = rel ? `${rel}/${e.name}` : e.name;
          if (e.isDirectory) await walk(`${dir}/${e.name}`, k);
          // A put under way (FsPackStore's `*.tmp`, renamed once whole) counts as its entry: a
          // clone may end before the fill it streamed from is renamed.
          else if (k.startsWith(prefix)) out.push(k);
        }
      };
      await walk(store, "");
      return out.sort();
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
};
