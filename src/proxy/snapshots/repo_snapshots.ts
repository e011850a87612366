/**
 * One repository's snapshot coordination: a single-flight over the snapshot builder, with the
 * manifest and build counters kept in a small key-value storage. Runtime-free: the Deno server
 * keeps one per repository in memory (`InProcessCoordinator`), the Worker one per Durable Object with
 * the DO's storage (`edge/cloudflare/repo_snapshots_object.ts`).
 */
import type { Clock, ScheduleBasis, SnapshotStatus } from "../core/deps.ts";
import type { Manifest } from "../core/manifest.ts";
import type { OriginAuth, RepoRef } from "../core/repo.ts";
import type { Metrics } from "../core/metrics.ts";
import { publicMessage } from "../../redact.ts";
import type { BuildProgress, BuildState } from "./snapshot.ts";

/** The storage this needs: a subset of Durable Object storage's API. */
export interface SnapshotStorage {
  get<T>(key: string): Promise<T | undefined>;
  put<T>(key: string, value: T): Promise<void>;
  put<T>(entries: Record<string, T>): Promise<void>;
  delete(key: string): Promise<boolean>;
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

  delete(key: string): Promise<boolean> {
    return Promise.resolve(this.#values.delete(key));
  }

  setAlarm(): Promise<void> {
    return Promise.reject(new Error("MemorySnapshotStorage has no alarms: set refreshMs to null"));
  }
}

/** Builds or refreshes a snapshot (implemented by `SnapshotBuilder`). */
export interface Builder {
  build(repo: RepoRef, auth: OriginAuth, previous: Manifest | null): Promise<Manifest>;
}

/** A builder that can also run a build one step at a time (see `SnapshotBuilder.step`). */
export interface StepBuilder extends Builder {
  begin(repo: RepoRef, auth: OriginAuth, previous: Manifest | null): Promise<BuildProgress>;
  step(state: BuildState, auth: OriginAuth): Promise<BuildProgress>;
  abandon(state: BuildState): Promise<void>;
}

/**
 * How builds run: whole, in the invocation that asks (a `Builder`); or `stepByAlarm`, one step
 * per invocation: the first invocation lists the tips and fetches the pack (the only steps that
 * need the caller's credentials), every later step runs in an alarm, with the build's state in
 * storage in between (a `StepBuilder`, and storage with alarms).
 */
export type BuildMode =
  | { stepByAlarm?: false; builder: Builder }
  | { stepByAlarm: true; builder: StepBuilder };

export type RepoSnapshotsDeps = RepoSnapshotsOptions & BuildMode;

/** What {@link RepoSnapshots} is built from besides its {@link BuildMode}. */
export interface RepoSnapshotsOptions {
  storage: SnapshotStorage;
  clock: Clock;
  /** The manifest to start from when storage has none (the copy the builder left in the store). */
  manifestInStore: (repo: RepoRef) => Promise<Manifest | null>;
  /** Refresh period for snapshots built without credentials; null disables refreshes. */
  refreshMs: number | null;
  /** Where failures of builds nobody awaits are reported. */
  onBackgroundError: (repo: RepoRef, error: unknown) => void;
  /** Counts builds and failures, when given. */
  metrics?: Metrics;
  /** Subrequests made so far by this process (counted by the runtime adapter), for the stats. */
  subrequests?: () => number;
  /**
   * After a failed build, builds requested by clones wait this long (ms), doubling with each
   * failure in a row up to 64 times; `warm` does not wait. 0 or absent: no wait.
   */
  backoffMs?: number;
  /** Told of each snapshot published (after it is stored), e.g. to keep the store under its cap. */
  onPublished?: (repo: RepoRef, manifest: Manifest) => void;
}

/** A build carried across invocations, as kept in storage. */
export interface PendingBuild {
  state: BuildState;
  /** Failed attempts of the current step. */
  attempts: number;
  /** Whether the build runs with credentials (then no refresh alarm is armed after it). */
  credentialed: boolean;
  stats: BuildStats;
}

/** How a build went: invocations it took and the most subrequests one of them made. */
export interface BuildStats {
  invocations: number;
  maxSubrequests: number;
  startedAt: number;
  finishedAt?: number;
}

/** Attempts per step before a build carried across invocations is abandoned. */
export const MAX_STEP_ATTEMPTS = 3;
/** Delay before retrying a failed step (doubles per attempt). */
const STEP_RETRY_MS = 1000;

/** What is kept in storage besides the manifest. */
export interface SnapshotMeta {
  /** The repository served (alarms arrive without a request naming it). */
  repo: RepoRef;
  builds: number;
  lastError: string | null;
  /** Stats of the last build that published a snapshot. */
  lastBuild?: BuildStats;
  /** Builds failed in a row (0 after a success); absent in state kept by older versions. */
  failures?: number;
  /** When the last build failed (ms since epoch). */
  failedAt?: number | null;
}

/** A repository's state here: its build counters and the manifest of its published snapshot. */
interface RepoState {
  meta: SnapshotMeta;
  manifest: Manifest | null;
}

export const META_KEY = "meta";
export const MANIFEST_KEY = "manifest";
export const BUILD_KEY = "build";

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
  #state: Promise<RepoState> | null = null;
  #building: Promise<Manifest> | null = null;
  /** The builder when builds are carried across invocations (stepByAlarm), else null. */
  readonly #steps: StepBuilder | null;
  /** Settles the running build carried across invocations (stepByAlarm). */
  #waiter: PromiseWithResolvers<Manifest> | null = null;

  constructor(deps: RepoSnapshotsDeps) {
    this.#deps = deps;
    this.#steps = deps.stepByAlarm ? deps.builder : null;
  }

  /** The ready manifest, or null. */
  async manifest(repo: RepoRef): Promise<Manifest | null> {
    return (await this.#load(repo)).manifest;
  }

  async status(repo: RepoRef): Promise<SnapshotStatus> {
    const { meta, manifest } = await this.#load(repo);
    const pending = await this.#pending();
    const building = this.#building !== null || pending !== undefined;
    const status: SnapshotStatus = {
      state: building ? "building" : manifest ? "ready" : "none",
      tips: manifest ? [...new Set(Object.values(manifest.tips))] : [],
      packs: manifest ? manifest.layers.flat().map((p) => ({ hash: p.hash, bytes: p.size })) : [],
      builtAt: manifest?.builtAt ?? null,
      builds: meta.builds,
      lastError: meta.lastError,
      failedAt: meta.failedAt ?? null,
      retryAt: this.#retryAt(meta),
    };
    if (meta.lastBuild) status.lastBuild = meta.lastBuild;
    if (pending) {
      status.pending = {
        next: pending.state.next,
        packsWritten: pending.state.written.length,
        invocations: pending.stats.invocations,
      };
    }
    return status;
  }

  /**
   * Starts a build unless one runs, or (with a `basis`) unless the snapshot in force is no longer
   * the one the caller judged; returns whether this call started it. A failure goes to
   * `onBackgroundError` and `lastError`.
   */
  async schedule(repo: RepoRef, auth: OriginAuth, basis?: ScheduleBasis): Promise<boolean> {
    if (basis && ((await this.manifest(repo))?.builtAt ?? null) !== basis.builtAt) return false;
    const retryAt = this.#retryAt((await this.#load(repo)).meta);
    if (retryAt !== null && this.#deps.clock.now() < retryAt) {
      this.#deps.metrics?.inc("gitedge_snapshot_builds_deferred_total");
      return false;
    }
    const { build, started } = await this.#build(repo, auth, basis?.rebuild ?? false);
    build.catch((error) => this.#deps.onBackgroundError(repo, error));
    return started;
  }

  /**
   * Builds now, joining a running build (`fresh`: not on top of the current snapshot, whose packs
   * the caller found damaged); the resulting status, and whether this call started it.
   */
  async warm(
    repo: RepoRef,
    auth: OriginAuth,
    fresh = false,
  ): Promise<{ status: SnapshotStatus; started: boolean }> {
    const { build, started } = await this.#build(repo, auth, fresh);
    await build;
    return { status: await this.status(repo), started };
  }

  /** Whether a build runs (or is carried across invocations) in this instance. */
  get busy(): boolean {
    return this.#building !== null || this.#waiter !== null;
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
    const { build, started, firstInvocation } = await this.#build(
      meta.repo,
      { headers: {} },
      false,
    );
    if (!this.#steps) return void await build;
    // Later steps run in later alarms, which cannot start while this one waits: wait only for
    // this invocation's part of the build.
    build.catch((error) => this.#deps.onBackgroundError(meta.repo, error));
    if (started) await firstInvocation;
  }

  /**
   * The storage's alarm: runs the next step of a build carried across invocations, or else the
   * periodic refresh. A failed step is retried by a later alarm, then the build is abandoned.
   */
  async alarm(): Promise<void> {
    const steps = this.#steps;
    const pending = await this.#pending();
    if (!steps || pending === undefined) return await this.refresh();
    await this.#runStep(steps, pending);
  }

  async #pending(): Promise<PendingBuild | undefined> {
    return this.#steps ? await this.#deps.storage.get<PendingBuild>(BUILD_KEY) : undefined;
  }

  /** Joins the running build, or starts one (`fresh`: not on top of the current snapshot). */
  async #build(
    repo: RepoRef,
    auth: OriginAuth,
    fresh: boolean,
  ): Promise<{ build: Promise<Manifest>; started: boolean; firstInvocation?: Promise<void> }> {
    if (this.#building) return { build: this.#building, started: false };
    if (await this.#pending() !== undefined) {
      // A build carried across invocations is under way (this instance may be a new one).
      this.#building ??= this.#awaitSteps();
      return { build: this.#building, started: false };
    }
    if (this.#building) return { build: this.#building, started: false };
    const first = Promise.withResolvers<void>();
    first.promise.catch(() => {});
    const steps = this.#steps;
    const run = steps
      ? this.#firstSteps(steps, repo, auth, fresh, first).catch((error) => {
        first.reject(error);
        throw error;
      })
      : this.#runBuild(repo, auth, fresh);
    const build = run.finally(() => {
      if (this.#building === build) this.#building = null;
    });
    this.#building = build;
    return { build, started: true, firstInvocation: first.promise };
  }

  async #runBuild(repo: RepoRef, auth: OriginAuth, fresh: boolean): Promise<Manifest> {
    const state = await this.#begun(repo);
    const before = this.#deps.subrequests?.() ?? 0;
    const startedAt = this.#deps.clock.now();
    let manifest: Manifest;
    const previous = fresh ? null : state.manifest;
    try {
      manifest = await this.#deps.builder.build(repo, auth, previous);
    } catch (error) {
      await this.#failed(state, error);
      throw error;
    }
    // The origin had not moved: nothing was built, and the last build stays the one that built.
    if (previous !== null && manifest === previous) {
      await this.#publish(state, manifest, Object.keys(auth.headers).length > 0, false);
      return manifest;
    }
    state.meta.lastBuild = {
      invocations: 1,
      maxSubrequests: (this.#deps.subrequests?.() ?? 0) - before,
      startedAt,
      finishedAt: this.#deps.clock.now(),
    };
    await this.#publish(state, manifest, Object.keys(auth.headers).length > 0);
    return manifest;
  }

  /**
   * The first invocation of a build carried across invocations: lists the tips and fetches the
   * pack with the caller's credentials, then leaves the rest to alarms. Resolves `first` once
   * this invocation's part is done (the caller rejects it when that fails).
   */
  async #firstSteps(
    builder: StepBuilder,
    repo: RepoRef,
    auth: OriginAuth,
    fresh: boolean,
    first: PromiseWithResolvers<void>,
  ): Promise<Manifest> {
    const { storage, clock } = this.#deps;
    const state = await this.#begun(repo);
    const credentialed = Object.keys(auth.headers).length > 0;
    const before = this.#deps.subrequests?.() ?? 0;
    let progress: BuildProgress | undefined;
    let started: BuildState | undefined;
    try {
      progress = await builder.begin(repo, auth, fresh ? null : state.manifest);
      if ("state" in progress) {
        started = progress.state;
        progress = await builder.step(started, auth);
      }
    } catch (error) {
      if (started) await builder.abandon(started).catch(() => {});
      await this.#failed(state, error);
      throw error;
    }
    if ("done" in progress) {
      await this.#publish(state, progress.done, credentialed);
      first.resolve();
      return progress.done;
    }
    const pending: PendingBuild = {
      state: progress.state,
      attempts: 0,
      credentialed,
      stats: {
        invocations: 1,
        maxSubrequests: (this.#deps.subrequests?.() ?? 0) - before,
        startedAt: clock.now(),
      },
    };
    const done = this.#awaitSteps();
    await storage.put(BUILD_KEY, pending);
    await storage.setAlarm(clock.now());
    first.resolve();
    return await done;
  }

  /** A promise settled when the build carried across invocations ends. */
  #awaitSteps(): Promise<Manifest> {
    this.#waiter ??= Promise.withResolvers<Manifest>();
    return this.#waiter.promise;
  }

  #settle(outcome: { manifest: Manifest } | { error: unknown }): void {
    const waiter = this.#waiter;
    this.#waiter = null;
    if (!waiter) return;
    if ("manifest" in outcome) waiter.resolve(outcome.manifest);
    else waiter.reject(outcome.error);
  }

  /** Runs one step of `pending` (in an alarm); arms the alarm for the next one. */
  async #runStep(builder: StepBuilder, pending: PendingBuild): Promise<void> {
    const { storage, clock } = this.#deps;
    const state = await this.#load(pending.state.repo);
    const before = this.#deps.subrequests?.() ?? 0;
    let progress: BuildProgress;
    try {
      // Only the first invocation's steps reach the origin; these need no credentials.
      progress = await builder.step(pending.state, { headers: {} });
    } catch (error) {
      pending.attempts++;
      if (pending.attempts < MAX_STEP_ATTEMPTS) {
        await storage.put(BUILD_KEY, pending);
        await storage.setAlarm(clock.now() + STEP_RETRY_MS * 2 ** (pending.attempts - 1));
        return;
      }
      await builder.abandon(pending.state).catch(() => {});
      await storage.delete(BUILD_KEY);
      await this.#failed(state, error);
      this.#deps.onBackgroundError(pending.state.repo, error);
      this.#settle({ error });
      return;
    }
    const stats = pending.stats;
    stats.invocations++;
    stats.maxSubrequests = Math.max(
      stats.maxSubrequests,
      (this.#deps.subrequests?.() ?? 0) - before,
    );
    if ("done" in progress) {
      stats.finishedAt = clock.now();
      state.meta.lastBuild = stats;
      await storage.delete(BUILD_KEY);
      await this.#publish(state, progress.done, pending.credentialed);
      this.#settle({ manifest: progress.done });
      return;
    }
    await storage.put(BUILD_KEY, { ...pending, state: progress.state, attempts: 0 });
    await storage.setAlarm(clock.now());
  }

  /** Counts a build that starts. */
  async #begun(repo: RepoRef): Promise<RepoState> {
    const state = await this.#load(repo);
    state.meta.builds++;
    this.#deps.metrics?.inc("gitedge_snapshot_builds_total");
    await this.#deps.storage.put(META_KEY, state.meta);
    return state;
  }

  async #failed(state: RepoState, error: unknown): Promise<void> {
    this.#deps.metrics?.inc("gitedge_snapshot_build_failures_total");
    state.meta.lastError = publicMessage(error);
    state.meta.failures = (state.meta.failures ?? 0) + 1;
    state.meta.failedAt = this.#deps.clock.now();
    await this.#deps.storage.put(META_KEY, state.meta);
  }

  async #publish(
    state: RepoState,
    manifest: Manifest,
    credentialed: boolean,
    built = true,
  ): Promise<void> {
    const { storage, clock, refreshMs } = this.#deps;
    state.manifest = manifest;
    state.meta.lastError = null;
    state.meta.failures = 0;
    state.meta.failedAt = null;
    await storage.put<SnapshotMeta | Manifest>({
      [META_KEY]: state.meta,
      [MANIFEST_KEY]: manifest,
    });
    if (refreshMs !== null && !credentialed) await storage.setAlarm(clock.now() + refreshMs);
    const last = state.meta.lastBuild;
    if (built && last?.finishedAt !== undefined) {
      this.#deps.metrics?.observe(
        "gitedge_snapshot_build_duration_seconds",
        (last.finishedAt - last.startedAt) / 1000,
      );
    }
    this.#deps.onPublished?.(state.meta.repo, manifest);
  }

  /**
   * When a clone may start a build again after failures (ms since epoch), or null: the backoff
   * doubles with each failure in a row, from `backoffMs` up to 64 times it.
   */
  #retryAt(meta: SnapshotMeta): number | null {
    const failures = meta.failures ?? 0;
    const base = this.#deps.backoffMs ?? 0;
    if (failures === 0 || !meta.failedAt || base <= 0) return null;
    return meta.failedAt + base * 2 ** Math.min(failures - 1, 6);
  }

  /** The state, read from storage once per instance and cached; checks the repository. */
  async #load(repo: RepoRef): Promise<RepoState> {
    this.#state ??= this.#read(repo).catch((error) => {
      this.#state = null;
      throw error;
    });
    const state = await this.#state;
    if (state.meta.repo.id !== repo.id) {
      throw new RepoMismatchError(state.meta.repo.id, repo.id);
    }
    return state;
  }

  async #read(repo: RepoRef): Promise<RepoState> {
    const { storage, manifestInStore } = this.#deps;
    const meta = await storage.get<SnapshotMeta>(META_KEY) ?? { repo, builds: 0, lastError: null };
    const manifest = await storage.get<Manifest>(MANIFEST_KEY) ?? await manifestInStore(repo);
    return { meta, manifest };
  }
}
