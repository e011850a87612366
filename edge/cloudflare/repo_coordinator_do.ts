/**
 * `RepoCoordinator`: the Durable Object that coordinates one repository's snapshots.
 *
 * Cloudflare runs exactly one instance per repository id, so the in-memory single-flight of
 * `RepoSnapshots` is single-flight across every Worker isolate. The manifest and build counters
 * live in the DO's own storage (strongly consistent, survives eviction); packs go to R2 through
 * the shared `SnapshotBuilder`. With `REFRESH_SECONDS` set, snapshots that need no credentials
 * are refreshed by the DO's alarm. Credentials are used in memory only, never stored.
 */
import { DEFAULT_EDGE_CONFIG, type RepoRef } from "../../src/proxy/deps.ts";
import { readManifest, SnapshotBuilder } from "../../src/proxy/snapshot.ts";
import {
  type CoordinatorCall,
  CoordinatorProtocolError,
  type CoordinatorReplies,
  decodeCall,
  encodeFailure,
  jsonResponse,
} from "./coordinator_protocol.ts";
import { type Env, workerSettings } from "./env.ts";
import { R2PackStore } from "./r2_store.ts";
import { RepoMismatchError, RepoSnapshots } from "../../src/proxy/repo_snapshots.ts";
import type { DurableObjectState } from "./worker_types.ts";
import { SubrequestCounter } from "./subrequests.ts";

/** The Durable Object class bound as `REPO_COORDINATOR` (one instance per repository id). */
export class RepoCoordinator {
  readonly #snapshots: RepoSnapshots;

  constructor(state: DurableObjectState, env: Env) {
    const { config, r2PartMiB, refreshSeconds } = workerSettings(env);
    const partBytes = r2PartMiB * 1024 * 1024;
    const subrequests = new SubrequestCounter();
    const store = new R2PackStore(subrequests.bucket(env.PACKS), { partBytes });
    const clock = { now: () => Date.now() };
    this.#snapshots = new RepoSnapshots({
      storage: state.storage,
      builder: new SnapshotBuilder({
        store,
        originFetch: subrequests.fetch((request) => fetch(request)),
        clock,
        chunks: config.chunks,
        // The origin's pack waits between build steps in segments of one R2 part each.
        segmentBytes: partBytes,
      }),
      clock,
      seedManifest: (repo) => readManifest(store, repo),
      refreshMs: refreshSeconds === undefined ? null : refreshSeconds * 1000,
      onBackgroundError: reportBackgroundFailure,
      // Each step of a build is its own invocation (alarms), within the per-invocation limits.
      stepByAlarm: true,
      subrequests: () => subrequests.count,
      backoffMs: (config.buildBackoffSeconds ?? DEFAULT_EDGE_CONFIG.buildBackoffSeconds) * 1000,
    });
  }

  /** Serves one `SnapshotCoordinator` call (see `coordinator_protocol.ts`). */
  async fetch(request: Request): Promise<Response> {
    let call: CoordinatorCall;
    try {
      call = await decodeCall(request);
    } catch (error) {
      if (!(error instanceof CoordinatorProtocolError)) throw error;
      return jsonResponse({ error: error.message }, 400);
    }
    try {
      return jsonResponse(await this.#serve(call));
    } catch (error) {
      return jsonResponse(encodeFailure(error), error instanceof RepoMismatchError ? 409 : 500);
    }
  }

  /**
   * The next step of a running build, or else the refresh (a failed refresh throws, so the
   * runtime retries it with backoff).
   */
  async alarm(): Promise<void> {
    await this.#snapshots.alarm();
  }

  async #serve(call: CoordinatorCall): Promise<CoordinatorReplies[typeof call.op]> {
    const { repo, auth, basis } = call;
    switch (call.op) {
      case "manifest":
        return { manifest: await this.#snapshots.manifest(repo) };
      case "status":
        return { status: await this.#snapshots.status(repo) };
      case "schedule":
        return { started: await this.#snapshots.schedule(repo, auth, basis) };
      case "warm":
        return await this.#snapshots.warm(repo, auth);
    }
  }
}

function reportBackgroundFailure(repo: RepoRef, error: unknown): void {
  console.error(`gitedge: background snapshot build for ${repo.path} failed:`, error);
}
