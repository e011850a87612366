/**
 * Single-flight coordination of snapshot builds, per repository, within one process. The Deno
 * server uses it directly; the Worker runs one inside each repository's Durable Object.
 */
import type { Coordinator, Manifest, OriginAuth, RepoRef, SnapshotStatus } from "./deps.ts";
import { manifestPacks, readManifest, type SnapshotBuilder } from "./snapshot.ts";
import type { PackStore } from "../storage/store.ts";
import type { Metrics } from "./metrics.ts";

interface RepoState {
  manifest: Manifest | null;
  loaded: boolean;
  building: Promise<Manifest> | null;
  builds: number;
  lastError: string | null;
}

export interface LocalCoordinatorDeps {
  store: PackStore;
  builder: SnapshotBuilder;
  metrics?: Metrics;
  /** Reports background failures (a build nobody awaits). */
  onError?: (repo: RepoRef, err: unknown) => void;
}

export class LocalCoordinator implements Coordinator {
  readonly #deps: LocalCoordinatorDeps;
  readonly #repos = new Map<string, RepoState>();

  constructor(deps: LocalCoordinatorDeps) {
    this.#deps = deps;
  }

  #state(repo: RepoRef): RepoState {
    let s = this.#repos.get(repo.id);
    if (!s) {
      s = { manifest: null, loaded: false, building: null, builds: 0, lastError: null };
      this.#repos.set(repo.id, s);
    }
    return s;
  }

  async manifest(repo: RepoRef): Promise<Manifest | null> {
    const s = this.#state(repo);
    if (!s.loaded) {
      s.manifest = await readManifest(this.#deps.store, repo);
      s.loaded = true;
    }
    return s.manifest;
  }

  async status(repo: RepoRef): Promise<SnapshotStatus> {
    const s = this.#state(repo);
    const m = await this.manifest(repo);
    return {
      state: s.building ? "building" : m ? "ready" : "none",
      tips: m ? [...new Set(Object.values(m.tips))] : [],
      packs: m ? manifestPacks(m).map((p) => ({ hash: p.hash, bytes: p.size })) : [],
      builtAt: m?.builtAt ?? null,
      builds: s.builds,
      lastError: s.lastError,
    };
  }

  schedule(repo: RepoRef, auth: OriginAuth): Promise<void> {
    this.#build(repo, auth).catch((err) => this.#deps.onError?.(repo, err));
    return Promise.resolve();
  }

  async warm(repo: RepoRef, auth: OriginAuth): Promise<SnapshotStatus> {
    await this.#build(repo, auth);
    return await this.status(repo);
  }

  /** Joins the running build of `repo` or starts one. */
  #build(repo: RepoRef, auth: OriginAuth): Promise<Manifest> {
    const s = this.#state(repo);
    if (s.building) return s.building;
    const run = async (): Promise<Manifest> => {
      const previous = await this.manifest(repo);
      s.builds++;
      this.#deps.metrics?.inc("gitedge_snapshot_builds_total");
      try {
        const m = await this.#deps.builder.build(repo, auth, previous);
        s.manifest = m;
        s.loaded = true;
        s.lastError = null;
        return m;
      } catch (err) {
        s.lastError = err instanceof Error ? err.message : String(err);
        this.#deps.metrics?.inc("gitedge_snapshot_build_failures_total");
        throw err;
      }
    };
    s.building = run().finally(() => {
      s.building = null;
    });
    return s.building;
  }
}
