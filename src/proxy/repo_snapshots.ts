/**
 * One repository's snapshot coordination: a single-flight over the snapshot builder, with the
 * manifest and build counters kept in a small key-value storage. Runtime-free: the Deno server
 * keeps one per repository in memory (`LocalCoordinator`), the Worker one per Durable Object with
 * the DO's storage (`edge/repo_coordinator_do.ts`).
 */
import type {
  Clock,
  Manifest,
  OriginAuth,
  RepoRef,
  ScheduleBasis,
  SnapshotStatus,
} from "./deps.ts";
import type { Metrics } from "./metrics.ts";
import { publicMessage } from "./errors.ts";

/** The storage this needs: a subset of Durable Object storage's API. */
export interface SnapshotStorage {
  get<T>(key: string): Promise<T | undefined>;
  put<T>(key: string, value: T): Promise<void>;
  put<T>(entries: Record<string, T>): Promise<void>;
  setAlarm(scheduledTime: number | Date): Promise<void>;
}

/** Process memory as `SnapshotStorage` (values are kept as given; no alarms). */
export class MemorySnapshotStorage implements SnapshotStorage {
  readonly #values = new Map<string, unknown>();

  get<T>(key: string): Promise<T | undefined> {
    return Promise.resolve(this.#values.get(key) as T | undefined);
  }

  put<T>(keyOrEntries: string | Record<string, T>, value?: T): Promise<void> {
    const entries = typeof keyOrEntries === "string" ? { [keyOrEntries]: value } : keyOrEntries;
    for (const [k, v] of Object.entries(entries)) this.#values.set(k, v);
    return Promise.resolve();
  }

  setAlarm(): Promise<void> {
    return Promise.reject(new Error("MemorySnapshotStorage has no alarms: set refreshMs to null"));
  }
}

/** Builds or refreshes a snapshot (implemented by `SnapshotBuilder`). */
export interface Builder {
  build(repo: RepoRef, auth: OriginAuth, previous: Manifest | null): Promise<Manifest>;
}

export interface RepoSnapshotsDeps {
  storage: SnapshotStorage;
  builder: Builder;
  clock: Clock;
  /** The manifest to start from when storage has none (the copy the builder left in the store). */
  seedManifest: (repo: RepoRef) => Promise<Manifest | null>;
  /** Refresh period for snapshots built without credentials; null disables refreshes. */
  refreshMs: number | null;
  /** Where failures of builds nobody awaits are reported. */
  onBackgroundError: (repo: RepoRef, error: unknown) => void;
  /** Counts builds and failures, when given. */
  metrics?: Metrics;
}

/** What is kept in storage besides the manifest. */
export interface SnapshotMeta {
  /** The repository served (alarms arrive without a request naming it). */
  repo: RepoRef;
  builds: number;
  lastError: string | null;
}

interface Snapshot {
  meta: SnapshotMeta;
  manifest: Manifest | null;
}

export const META_KEY = "meta";
export const MANIFEST_KEY = "manifest";

/** A call named a different repository than the one this coordinator serves. */
export class RepoMismatchError extends Error {
  override name = "RepoMismatchError";
  constructor(readonly expected: string, readonly got: string) {
    super(`this coordinator serves repository ${expected}, not ${got}`);
  }
}

/** Single-flight snapshot builds and durable snapshot state for one repository. */
export class RepoSnapshots {
  readonly #deps: RepoSnapshotsDeps;
  #snapshot: Promise<Snapshot> | null = null;
  #building: Promise<Manifest> | null = null;

  constructor(deps: RepoSnapshotsDeps) {
    this.#deps = deps;
  }

  /** The ready manifest, or null. */
  async manifest(repo: RepoRef): Promise<Manifest | null> {
    return (await this.#load(repo)).manifest;
  }

  async status(repo: RepoRef): Promise<SnapshotStatus> {
    const { meta, manifest } = await this.#load(repo);
    return {
      state: this.#building ? "building" : manifest ? "ready" : "none",
      tips: manifest ? [...new Set(Object.values(manifest.tips))] : [],
      packs: manifest ? manifest.layers.flat().map((p) => ({ hash: p.hash, bytes: p.size })) : [],
      builtAt: manifest?.builtAt ?? null,
      builds: meta.builds,
      lastError: meta.lastError,
    };
  }

  /**
   * Starts a build unless one runs, or (with a `basis`) unless the snapshot in force is no longer
   * the one the caller judged; returns whether this call started it. A failure goes to
   * `onBackgroundError` and `lastError`.
   */
  async schedule(repo: RepoRef, auth: OriginAuth, basis?: ScheduleBasis): Promise<boolean> {
    if (basis && ((await this.manifest(repo))?.builtAt ?? null) !== basis.builtAt) return false;
    const { build, started } = this.#build(repo, auth, basis?.rebuild ?? false);
    build.catch((error) => this.#deps.onBackgroundError(repo, error));
    return started;
  }

  /** Builds now, joining a running build; the resulting status, and whether this call started it. */
  async warm(
    repo: RepoRef,
    auth: OriginAuth,
  ): Promise<{ status: SnapshotStatus; started: boolean }> {
    const { build, started } = this.#build(repo, auth, false);
    await build;
    return { status: await this.status(repo), started };
  }

  /** Resolves once no build is running (whatever its outcome). */
  async idle(): Promise<void> {
    while (this.#building) await this.#building.catch(() => {});
  }

  /** The periodic refresh (alarm): rebuilds without credentials; throws when the build fails. */
  async refresh(): Promise<void> {
    if (this.#deps.refreshMs === null) return;
    const meta = await this.#deps.storage.get<SnapshotMeta>(META_KEY);
    if (meta === undefined) return;
    await this.#build(meta.repo, { headers: {} }, false).build;
  }

  /** Joins the running build, or starts one (`fresh`: not on top of the current snapshot). */
  #build(
    repo: RepoRef,
    auth: OriginAuth,
    fresh: boolean,
  ): { build: Promise<Manifest>; started: boolean } {
    if (this.#building) return { build: this.#building, started: false };
    const build = this.#runBuild(repo, auth, fresh).finally(() => {
      this.#building = null;
    });
    this.#building = build;
    return { build, started: true };
  }

  async #runBuild(repo: RepoRef, auth: OriginAuth, fresh: boolean): Promise<Manifest> {
    const { storage, builder, clock, refreshMs } = this.#deps;
    const snapshot = await this.#load(repo);
    snapshot.meta.builds++;
    this.#deps.metrics?.inc("gitedge_snapshot_builds_total");
    await storage.put(META_KEY, snapshot.meta);
    let manifest: Manifest;
    try {
      manifest = await builder.build(repo, auth, fresh ? null : snapshot.manifest);
    } catch (error) {
      this.#deps.metrics?.inc("gitedge_snapshot_build_failures_total");
      snapshot.meta.lastError = publicMessage(error);
      await storage.put(META_KEY, snapshot.meta);
      throw error;
    }
    snapshot.manifest = manifest;
    snapshot.meta.lastError = null;
    await storage.put<SnapshotMeta | Manifest>({
      [META_KEY]: snapshot.meta,
      [MANIFEST_KEY]: manifest,
    });
    if (refreshMs !== null && Object.keys(auth.headers).length === 0) {
      await storage.setAlarm(clock.now() + refreshMs);
    }
    return manifest;
  }

  /** The state, read from storage once per instance and cached; checks the repository. */
  async #load(repo: RepoRef): Promise<Snapshot> {
    this.#snapshot ??= this.#read(repo).catch((error) => {
      this.#snapshot = null;
      throw error;
    });
    const snapshot = await this.#snapshot;
    if (snapshot.meta.repo.id !== repo.id) {
      throw new RepoMismatchError(snapshot.meta.repo.id, repo.id);
    }
    return snapshot;
  }

  async #read(repo: RepoRef): Promise<Snapshot> {
    const { storage, seedManifest } = this.#deps;
    const meta = await storage.get<SnapshotMeta>(META_KEY) ?? { repo, builds: 0, lastError: null };
    const manifest = await storage.get<Manifest>(MANIFEST_KEY) ?? await seedManifest(repo);
    return { meta, manifest };
  }
}
