/**
 * The Worker's `SnapshotCoordinator`: every call goes by RPC to the repository's
 * `RepoSnapshotsObject` Durable Object, so builds are single-flight across all Worker isolates and
 * locations.
 */
import type {
  ScheduleBasis,
  SnapshotCoordinator,
  SnapshotStatus,
} from "../../src/proxy/core/deps.ts";
import type { Manifest } from "../../src/proxy/core/manifest.ts";
import type { OriginAuth, RepoRef } from "../../src/proxy/core/repo.ts";
import type { Metrics } from "../../src/proxy/core/metrics.ts";
import { type RepoSnapshotsRpc, valueOf } from "./snapshot_rpc.ts";
import type { DurableObjectNamespace } from "./worker_types.ts";

/**
 * `SnapshotCoordinator` backed by one Durable Object per repository (named by the repository id).
 * Failures come back as the origin's typed errors or `SnapshotCallError`. Builds that calls from
 * this isolate started are counted in `metrics` (`gitedge_snapshot_builds_total`).
 */
export class DurableObjectCoordinator implements SnapshotCoordinator {
  readonly #namespace: DurableObjectNamespace<RepoSnapshotsRpc>;
  readonly #metrics: Metrics | undefined;

  constructor(namespace: DurableObjectNamespace<RepoSnapshotsRpc>, metrics?: Metrics) {
    this.#namespace = namespace;
    this.#metrics = metrics;
  }

  manifest(repo: RepoRef): Promise<Manifest | null> {
    return valueOf("manifest", repo.path, () => this.#object(repo).manifest(repo));
  }

  status(repo: RepoRef): Promise<SnapshotStatus> {
    return valueOf("status", repo.path, () => this.#object(repo).status(repo));
  }

  async schedule(repo: RepoRef, auth: OriginAuth, basis?: ScheduleBasis): Promise<void> {
    const started = await valueOf(
      "schedule",
      repo.path,
      () => this.#object(repo).schedule(repo, auth, basis),
    );
    this.#countStart(started);
  }

  async warm(
    repo: RepoRef,
    auth: OriginAuth,
    opts?: { rebuild?: boolean },
  ): Promise<SnapshotStatus> {
    const { status, started } = await valueOf(
      "warm",
      repo.path,
      () => this.#object(repo).warm(repo, auth, opts?.rebuild ?? false),
    );
    this.#countStart(started);
    return status;
  }

  #countStart(started: boolean): void {
    if (started) this.#metrics?.inc("gitedge_snapshot_builds_total");
  }

  /** The stub of `repo`'s Durable Object. */
  #object(repo: RepoRef): RepoSnapshotsRpc {
    return this.#namespace.get(this.#namespace.idFromName(repo.id));
  }
}
