/**
 * `RepoSnapshotsObject`: the Durable Object holding one repository's `RepoSnapshots`, which the
 * Worker's `DurableObjectCoordinator` calls by RPC (`snapshot_rpc.ts`).
 *
 * Cloudflare runs exactly one instance per repository id, so the in-memory single-flight of
 * `RepoSnapshots` is single-flight across every Worker isolate. The manifest and build counters
 * live in the DO's own storage (strongly consistent, survives eviction); packs go to R2 through
 * the shared `SnapshotBuilder`. With `REFRESH_SECONDS` set, snapshots that need no credentials
 * are refreshed by the DO's alarm. Credentials are used in memory only, never stored.
 */
/// <reference types="./cloudflare_workers.d.ts" />
import { DurableObject } from "cloudflare:workers";
import type { ScheduleBasis } from "../../src/proxy/core/deps.ts";
import { withDefaults } from "../../src/proxy/core/config.ts";
import type { OriginAuth, RepoRef } from "../../src/proxy/core/repo.ts";
import { readManifest } from "../../src/proxy/core/manifest.ts";
import { LoggingSnapshotBuilder } from "../../src/proxy/snapshots/build_log.ts";
import { loggedOriginFetch } from "../../src/proxy/origin/origin_log.ts";
import { workerLogger } from "./worker_log.ts";
import { outcomeOf, type RepoSnapshotsRpc } from "./snapshot_rpc.ts";
import { type Env, workerSettings } from "./env.ts";
import { R2PackStore } from "./r2_store.ts";
import { RepoSnapshots } from "../../src/proxy/snapshots/repo_snapshots.ts";
import type { DurableObjectState } from "./worker_types.ts";
import { SubrequestCounter } from "./subrequests.ts";

/** The Durable Object class bound as `REPO_SNAPSHOTS` (one instance per repository id). */
export class RepoSnapshotsObject extends DurableObject<Env, DurableObjectState>
  implements RepoSnapshotsRpc {
  readonly #snapshots: RepoSnapshots;

  /**
   * `storage` is where the snapshot state lives: the object's own storage, except in test
   * fixtures (the runtime checks that `state` is its own, so they cannot wrap `state`).
   */
  constructor(state: DurableObjectState, env: Env, storage = state.storage) {
    super(state, env);
    const settings = workerSettings(env);
    const { r2PartMiB, refreshSeconds, logLevel } = settings;
    const config = withDefaults(settings.config);
    const log = workerLogger(logLevel);
    const partBytes = r2PartMiB * 1024 * 1024;
    const subrequests = new SubrequestCounter();
    const store = new R2PackStore(subrequests.bucket(env.PACKS), { partBytes });
    const clock = { now: () => Date.now() };
    this.#snapshots = new RepoSnapshots({
      storage,
      builder: new LoggingSnapshotBuilder({
        log,
        store,
        originFetch: loggedOriginFetch(
          subrequests.fetch((request) => fetch(request)),
          log,
          clock,
          { for: "build" },
        ),
        clock,
        chunks: config.chunks,
        // The origin's pack waits between build steps in segments of one R2 part each.
        segmentBytes: partBytes,
      }),
      clock,
      manifestInStore: (repo) => readManifest(store, repo),
      refreshMs: refreshSeconds === undefined ? null : refreshSeconds * 1000,
      onBackgroundError: reportBackgroundFailure,
      // Each step of a build is its own invocation (alarms), within the per-invocation limits.
      stepByAlarm: true,
      subrequests: () => subrequests.count,
      backoffMs: config.buildBackoffSeconds * 1000,
    });
  }

  // The RPC methods (see `snapshot_rpc.ts`): a failure is returned, not thrown.

  manifest(repo: RepoRef): ReturnType<RepoSnapshotsRpc["manifest"]> {
    return outcomeOf(() => this.#snapshots.manifest(repo));
  }

  status(repo: RepoRef): ReturnType<RepoSnapshotsRpc["status"]> {
    return outcomeOf(() => this.#snapshots.status(repo));
  }

  schedule(
    repo: RepoRef,
    auth: OriginAuth,
    basis?: ScheduleBasis,
  ): ReturnType<RepoSnapshotsRpc["schedule"]> {
    return outcomeOf(() => this.#snapshots.schedule(repo, auth, basis));
  }

  warm(repo: RepoRef, auth: OriginAuth, rebuild = false): ReturnType<RepoSnapshotsRpc["warm"]> {
    return outcomeOf(() => this.#snapshots.warm(repo, auth, rebuild));
  }

  /**
   * The next step of a running build, or else the refresh (a failed refresh throws, so the
   * runtime retries it with backoff).
   */
  async alarm(): Promise<void> {
    await this.#snapshots.alarm();
  }
}

function reportBackgroundFailure(repo: RepoRef, error: unknown): void {
  console.error(`gitedge: background snapshot build for ${repo.path} failed:`, error);
}
