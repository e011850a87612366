/**
 * `InProcessCoordinator`: the `SnapshotCoordinator` of one process (the Deno server, tests): one
 * `RepoSnapshots` per repository in process memory, so builds are single-flight within the
 * process. (The Worker holds one per repository in a Durable Object instead.) The manifest and the
 * build counters also live in the pack store, so a restart picks them up again.
 */
import type { Clock, ScheduleBasis, SnapshotCoordinator, SnapshotStatus } from "../core/deps.ts";
import { type Manifest, readManifest } from "../core/manifest.ts";
import type { OriginAuth, RepoRef } from "../core/repo.ts";
import { type Builder, RepoSnapshots } from "./repo_snapshots.ts";
import { StoreSnapshotStorage } from "./store_snapshot_storage.ts";
import type { PackStore } from "../../storage/store.ts";
import type { Metrics } from "../core/metrics.ts";

export interface InProcessCoordinatorDeps {
  store: PackStore;
  /** The snapshot builder (`SnapshotBuilder`; in a fleet, one wrapped in the fleet lease). */
  builder: Builder;
  clock: Clock;
  metrics?: Metrics;
  /** Reports background failures (a build nobody awaits). */
  onError?: (repo: RepoRef, err: unknown) => void;
  /** See `RepoSnapshotsDeps.backoffMs`. */
  backoffMs?: number;
  /** See `RepoSnapshotsDeps.onPublished`. */
  onPublished?: (repo: RepoRef, manifest: Manifest) => void;
}

/** `SnapshotCoordinator` over a map of repository id to its `RepoSnapshots`. */
export class InProcessCoordinator implements SnapshotCoordinator {
  readonly #deps: InProcessCoordinatorDeps;
  readonly #repos = new Map<string, RepoSnapshots>();

  constructor(deps: InProcessCoordinatorDeps) {
    this.#deps = deps;
  }

  #snapshots(repo: RepoRef): RepoSnapshots {
    let s = this.#repos.get(repo.id);
    if (!s) {
      const { store, builder, clock, metrics, onError } = this.#deps;
      s = new RepoSnapshots({
        // Build counters are kept in the store too, so they survive a restart.
        storage: new StoreSnapshotStorage(store, repo.id),
        builder,
        clock,
        seedManifest: (r) => readManifest(store, r),
        refreshMs: null,
        backoffMs: this.#deps.backoffMs,
        onBackgroundError: (r, err) => onError?.(r, err),
        metrics,
        onPublished: this.#deps.onPublished,
      });
      this.#repos.set(repo.id, s);
    }
    return s;
  }

  manifest(repo: RepoRef): Promise<Manifest | null> {
    return this.#snapshots(repo).manifest(repo);
  }

  status(repo: RepoRef): Promise<SnapshotStatus> {
    return this.#snapshots(repo).status(repo);
  }

  async schedule(repo: RepoRef, auth: OriginAuth, basis?: ScheduleBasis): Promise<void> {
    await this.#snapshots(repo).schedule(repo, auth, basis);
  }

  async warm(
    repo: RepoRef,
    auth: OriginAuth,
    opts?: { rebuild?: boolean },
  ): Promise<SnapshotStatus> {
    return (await this.#snapshots(repo).warm(repo, auth, opts?.rebuild ?? false)).status;
  }

  /** Resolves once no build of any repository is running (whatever their outcomes). */
  async idle(): Promise<void> {
    await Promise.all([...this.#repos.values()].map((s) => s.idle()));
  }
}
