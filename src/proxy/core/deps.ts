/**
 * What the edge app is built from. Every runtime (Deno server, Cloudflare Worker, tests) builds
 * these and hands them to `createApp` in `app.ts`; nothing in `src/proxy` reaches for globals.
 */
import type { PackSeeds } from "../snapshots/pack_seeds.ts";
import type { PackStore } from "../../storage/store.ts";
import type { Logger } from "./log.ts";
import type { OriginAuth, RepoRef } from "./repo.ts";
import type { EdgeConfig } from "./config.ts";
import type { Manifest } from "./manifest.ts";
import type { Mirrors } from "../mirror/mirrors.ts";
import type { SharedRegistry } from "../ops/repo_registry.ts";

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

/** An incremental SHA-256 (LFS fills check each object's content against its oid). */
export interface Sha256Stream {
  update(chunk: Uint8Array): void;
  /** The digest of everything given; rejects if a chunk could not be hashed. */
  digest(): Promise<Uint8Array>;
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
  /** Where the request log and origin errors go (`src/proxy/core/log.ts`); none: not logged. */
  log?: Logger;
  /** True once the edge drains (stops taking work): readiness answers 503. */
  draining?: () => boolean;
  /**
   * Where clones' pass-through answers seed first builds (pack_seeds.ts); the same instance as
   * the snapshot builder's. Absent where builds run elsewhere (Workers).
   */
  packSeeds?: PackSeeds;
  /**
   * A native incremental SHA-256 of the runtime (the Deno server: `node:crypto`; Workers:
   * `crypto.DigestStream`); absent: a pure-JavaScript one (about 10 times slower).
   */
  sha256?: () => Sha256Stream;
  /**
   * The git mirrors of repositories (src/proxy/mirror), where a `git` binary runs (the Deno
   * server); absent: none (Workers), and fetches the snapshot does not take go to the origin.
   */
  mirrors?: Mirrors;
  /**
   * The fleet this edge is a node of (Deno edges on one store with `--coordinator`): the registry
   * merged fleet-wide, and one sweeper. Absent: one node (or Workers), the registry in the store.
   */
  fleet?: EdgeFleet;
}

/** What the app asks of the fleet (edge/deno/redis_fleet.ts, via the fleet coordinator). */
export interface EdgeFleet {
  /** The repository registry, counts and pins, merged by the coordination service (absent:
   * each node adds to the store's records). */
  registry?: SharedRegistry;
  /**
   * Runs `work` only if this node takes lease `name` (held, and renewed, while it runs); false
   * when another node holds it. Throws when the coordinator cannot be reached.
   */
  exclusive(name: string, work: () => Promise<unknown>): Promise<boolean>;
  /** Whether the store is full, as its sweeper (any node) last found it. */
  storeFull?: { get(): Promise<boolean>; set(full: boolean): Promise<void> };
}

/**
 * Runs `work` off the client's critical path: kept alive by the runtime's `waitUntil` where there
 * is one. A failure is logged (`background.failed`, or on the console without a logger), since no
 * client waits for it.
 */
export function inBackground(
  deps: Pick<EdgeDeps, "waitUntil" | "log">,
  work: Promise<unknown>,
): void {
  const logged = work.catch((error) => {
    if (deps.log) deps.log.log("error", "background.failed", { error });
    else console.error("gitedge: background work failed:", error);
  });
  deps.waitUntil?.(logged);
}
