/**
 * The Worker's `SnapshotCoordinator`: every call goes to the repository's `RepoCoordinator` Durable
 * Object, so builds are single-flight across all Worker isolates and locations.
 */
import type {
  Manifest,
  OriginAuth,
  RepoRef,
  ScheduleBasis,
  SnapshotCoordinator,
  SnapshotStatus,
} from "../../src/proxy/deps.ts";
import type { Metrics } from "../../src/proxy/metrics.ts";
import {
  type CoordinatorOp,
  type CoordinatorReplies,
  decodeFailure,
  encodeCall,
} from "./coordinator_protocol.ts";
import type { DurableObjectNamespace } from "./worker_types.ts";

const NO_AUTH: OriginAuth = { headers: {} };

/**
 * `SnapshotCoordinator` backed by one Durable Object per repository (named by the repository id).
 * Failures come back as the origin's typed errors or `CoordinatorCallError`. Builds that calls
 * from this isolate started are counted in `metrics` (`gitedge_snapshot_builds_total`).
 */
export class DurableObjectCoordinator implements SnapshotCoordinator {
  readonly #namespace: DurableObjectNamespace;
  readonly #metrics: Metrics | undefined;

  constructor(namespace: DurableObjectNamespace, metrics?: Metrics) {
    this.#namespace = namespace;
    this.#metrics = metrics;
  }

  async manifest(repo: RepoRef): Promise<Manifest | null> {
    return (await this.#call("manifest", repo, NO_AUTH)).manifest;
  }

  async status(repo: RepoRef): Promise<SnapshotStatus> {
    return (await this.#call("status", repo, NO_AUTH)).status;
  }

  async schedule(repo: RepoRef, auth: OriginAuth, basis?: ScheduleBasis): Promise<void> {
    this.#countStart(await this.#call("schedule", repo, auth, basis));
  }

  async warm(repo: RepoRef, auth: OriginAuth): Promise<SnapshotStatus> {
    const reply = await this.#call("warm", repo, auth);
    this.#countStart(reply);
    return reply.status;
  }

  #countStart(reply: { started: boolean }): void {
    if (reply.started) this.#metrics?.inc("gitedge_snapshot_builds_total");
  }

  async #call<Op extends CoordinatorOp>(
    op: Op,
    repo: RepoRef,
    auth: OriginAuth,
    basis?: ScheduleBasis,
  ): Promise<CoordinatorReplies[Op]> {
    const stub = this.#namespace.get(this.#namespace.idFromName(repo.id));
    const response = await stub.fetch(encodeCall({ op, repo, auth, basis }));
    if (!response.ok) {
      throw decodeFailure(op, repo.path, response.status, await response.text());
    }
    return await response.json() as CoordinatorReplies[Op];
  }
}
