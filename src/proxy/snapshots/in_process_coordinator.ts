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

/** Repositories whose snapshot state is kept in memory at once, building ones aside. */
export const MAX_REPO_STATES = 1024;

/**
 * `SnapshotCoordinator` over a map of repository id to its `RepoSnapshots`. Bounded: the state
 * of a repository with no snapshot and no build is dropped once its answer is given (a fetch or
 * bundle list of a path the origin does not serve holds nothing), and the least recently used
 * idle states beyond {@link MAX_REPO_STATES} are dropped; a dropped state is read back from the
 * store when next needed (its manifest and build counters live there).
 */
export class InProcessCoordinator implements SnapshotCoordinator {
  readonly #deps: InProcessCoordinatorDeps;
  readonly #repos = new Map<string, RepoSnapshots>();

  /** Repository states held (for tests and the limits docs). */
  get size(): number {
    return this.#repos.size;
  }

  /** Calls of `schedule` or `warm` under way, by repository id (their state is not dropped). */
  readonly #scheduling = new Map<string, number>();

  /** Drops `repo`'s state unless it builds, is about to, or holds a snapshot. */
  #forgetIfEmpty(repo: RepoRef, s: RepoSnapshots, manifest: Manifest | null): void {
    if (manifest || s.busy || this.#scheduling.has(repo.id)) return;
    if (this.#repos.get(repo.id) === s) this.#repos.delete(repo.id);
  }

  /** Runs `work` on `repo`'s state, which is kept while it runs (a build may be starting). */
  async #holding<T>(repo: RepoRef, work: (s: RepoSnapshots) => Promise<T>): Promise<T> {
    this.#scheduling.set(repo.id, (this.#scheduling.get(repo.id) ?? 0) + 1);
    try {
      return await work(this.#snapshots(repo));
    } finally {
      const left = this.#scheduling.get(repo.id)! - 1;
      if (left > 0) this.#scheduling.set(repo.id, left);
      else this.#scheduling.delete(repo.id);
    }
  }

  #prune(): void {
    if (this.#repos.size <= MAX_REPO_STATES) return;
    for (const [id, s] of this.#repos) {
      if (this.#repos.size <= MAX_REPO_STATES) break;
      if (!s.busy && !this.#scheduling.has(id)) this.#repos.delete(id);
    }
  }

  constructor(deps: InProcessCoordinatorDeps) {
    this.#deps = deps;
  }

  #snapshots(repo: RepoRef): RepoSnapshots {
    let s = this.#repos.get(repo.id);
    if (s) {
      // Most recently used last.
      this.#repos.delete(repo.id);
      this.#repos.set(repo.id, s);
    } else {
      const { store, builder, clock, metrics, onError } = this.#deps;
      s = new RepoSnapshots({
        // Build counters are kept in the store too, so they survive a restart.
        storage: new StoreSnapshotStorage(store, repo.id),
        builder,
        clock,
        manifestInStore: (r) => readManifest(store, r),
        refreshMs: null,
        backoffMs: this.#deps.backoffMs,
        onBackgroundError: (r, err) => onError?.(r, err),
        metrics,
        onPublished: this.#deps.onPublished,
      });
      this.#repos.set(repo.id, s);
      this.#prune();
    }
    return s;
  }

  async manifest(repo: RepoRef): Promise<Manifest | null> {
    const s = this.#snapshots(repo);
    const manifest = await s.manifest(repo);
    this.#forgetIfEmpty(repo, s, manifest);
    return manifest;
  }

  async status(repo: RepoRef): Promise<SnapshotStatus> {
    const s = this.#snapshots(repo);
    const status = await s.status(repo);
    if (status.state === "none" && status.builds === 0) this.#forgetIfEmpty(repo, s, null);
    return status;
  }

  async schedule(repo: RepoRef, auth: OriginAuth, basis?: ScheduleBasis): Promise<void> {
    await this.#holding(repo, (s) => s.schedule(repo, auth, basis));
  }

  async warm(
    repo: RepoRef,
    auth: OriginAuth,
    opts?: { rebuild?: boolean },
  ): Promise<SnapshotStatus> {
    return (await this.#holding(repo, (s) => s.warm(repo, auth, opts?.rebuild ?? false))).status;
  }

  /** Resolves once no build of any repository is running (whatever their outcomes). */
  async idle(): Promise<void> {
    await Promise.all([...this.#repos.values()].map((s) => s.idle()));
  }
}
