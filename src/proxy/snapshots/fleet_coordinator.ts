/**
 * `FleetCoordinator`: the `SnapshotCoordinator` of several Deno edges on one shared store (S3),
 * coordinated through a small lease service (`FleetState`: Redis or Valkey in production,
 * `edge/deno/redis_fleet.ts`). Runtime-free.
 *
 * - One build per repository across the fleet: a node builds only while it holds the lease
 *   `build:<repo id>` (taken with SET NX PX on the coordinator's clock, so the nodes' own clocks
 *   do not matter; renewed every third of its term). A node that finds the lease taken waits
 *   for the holder to publish, and takes the lease over when the holder dies, drains or loses it
 *   (the lease expires).
 * - Publishing is fenced: the builder's write of a repository's manifest goes through
 *   {@link FencedStore}, which refuses it unless this node still holds that repository's lease.
 *   A node cut off from the coordinator, or one that lost its lease, publishes nothing; its
 *   packs stay temporary (under names no manifest names) and the next build removes them.
 * - Every publish bumps a counter `published:<repo id>` (INCR: no lost update). Each node keeps
 *   the manifest it last read from the store and reads it again when that counter moved, so
 *   `manifest()` costs one coordinator read per fetch and no store request.
 * - When the coordinator cannot be reached, nodes keep serving the snapshot they know (packs are
 *   immutable, the manifest they read stays valid); builds fail (no lease) and clones pass
 *   through to the origin.
 */
import type { Clock, ScheduleBasis, SnapshotCoordinator, SnapshotStatus } from "../core/deps.ts";
import { type Manifest, readManifest } from "../core/manifest.ts";
import type { OriginAuth, RepoRef } from "../core/repo.ts";
import type { Metrics } from "../core/metrics.ts";
import { EdgeHttpError } from "../core/errors.ts";
import type { ByteRange, ObjectInfo, PackStore, StoredObject } from "../../storage/store.ts";
import { InProcessCoordinator } from "./in_process_coordinator.ts";
import type { Builder } from "./repo_snapshots.ts";

/**
 * What the fleet needs of a coordination service: leases that expire on the service's own clock,
 * and counters. Every call may throw when the service cannot be reached.
 */
export interface FleetState {
  /** Takes lease `name` for `ttlMs` with `token` unless someone holds it; whether it did. */
  acquire(name: string, token: string, ttlMs: number): Promise<boolean>;
  /** Extends lease `name` by `ttlMs` if `token` still holds it; whether it does. */
  renew(name: string, token: string, ttlMs: number): Promise<boolean>;
  /** Gives lease `name` up if `token` holds it. */
  release(name: string, token: string): Promise<void>;
  /** The token holding lease `name`, or null. */
  holder(name: string): Promise<string | null>;
  /** Adds 1 to counter `name` and returns the new value. */
  incr(name: string): Promise<number>;
  /** Counter `name` (0 when unset). */
  count(name: string): Promise<number>;
}

/** A build was refused or abandoned because this node does not (or no longer) hold the lease. */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
}

/** The coordination service did not answer: no build now (503: the client may retry). */
export class CoordinatorUnavailableError extends EdgeHttpError {
  override name = "CoordinatorUnavailableError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, 503, options);
  }
}

/** The lease of builds of the repository with id `repoId`. */
export function buildLease(repoId: string): string {
  return `build:${repoId}`;
}

/** The counter of snapshots published for the repository with id `repoId`. */
export function publishedCounter(repoId: string): string {
  return `published:${repoId}`;
}

/** Default term of a lease: a holder killed without a word is replaced after this long. */
export const DEFAULT_LEASE_MS = 30_000;

const MANIFEST_KEY_RE = /^repos\/([^/]+)\/manifest\.json$/;

/** Where response-cache entries live (`CACHE_PREFIX` of core/response_cache.ts). */
const CACHE_KEY_RE = /^cache\//;

/** How long a node's claim on a response-cache fill keeps the others from writing that entry. */
export const FILL_CLAIM_MS = 10 * 60_000;

/** How long a node waits for the entry another node fills before giving up on it (ms). */
export const FILL_WAIT_MS = 30_000;

/** Another node fills this response-cache entry: this node does not write it too. */
export class FillTakenError extends Error {
  override name = "FillTakenError";
}

/**
 * A `PackStore` whose writes of a manifest (`repos/<id>/manifest.json`) go through only while
 * `holds(id)` confirms this node holds that repository's build lease: the publish of a build
 * that lost its lease (or whose node is cut off from the coordinator) is refused. With `claim`,
 * a response-cache entry (`cache/…`) is written by one node of the fleet only: the node that
 * claims its fill first (the claim outlives the write, so nobody rewrites the entry under its
 * readers). Another node's fill of it stores nothing and resolves once the entry is there whole,
 * so the requests waiting on that node's fill read it (single-flight across the fleet, one
 * origin answer per node at most).
 */
export class FencedStore implements PackStore {
  constructor(
    readonly inner: PackStore,
    readonly holds: (repoId: string) => Promise<boolean>,
    readonly claim?: {
      take(key: string): Promise<boolean>;
      drop(key: string): Promise<void>;
    },
  ) {}

  /** Writes `key` by `write`, claiming the fill first when it is a response-cache entry. */
  async #write<T>(key: string, write: () => Promise<T>, onRefused: () => Promise<void>) {
    if (!this.claim || !CACHE_KEY_RE.test(key)) {
      try {
        await this.#fence(key);
      } catch (error) {
        await onRefused();
        throw error;
      }
      return await write();
    }
    let taken = false;
    try {
      taken = await this.claim.take(key);
    } catch {
      /* coordinator away: write as a lone node would */
      taken = true;
    }
    if (!taken) {
      // Another node writes this entry: wait for it to appear whole instead of rewriting it.
      await onRefused();
      const deadline = Date.now() + FILL_WAIT_MS;
      while (Date.now() < deadline) {
        const info = await this.inner.head(key);
        if (info) return { size: info.size } as T;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new FillTakenError(`another node fills ${key}, and it did not appear`);
    }
    try {
      return await write();
    } catch (error) {
      await this.claim.drop(key).catch(() => {});
      throw error;
    }
  }

  async #fence(key: string): Promise<void> {
    const repoId = key.match(MANIFEST_KEY_RE)?.[1];
    if (repoId === undefined) return;
    let held: boolean;
    try {
      held = await this.holds(repoId);
    } catch (error) {
      throw new CoordinatorUnavailableError(
        `the coordinator could not confirm the build lease: ${messageOf(error)}`,
        { cause: error },
      );
    }
    if (!held) throw new LeaseLostError(`the build lease of ${repoId} is held by another node`);
  }

  put(key: string, body: ReadableStream<Uint8Array>): Promise<{ size: number }> {
    return this.#write(
      key,
      () => this.inner.put(key, body),
      () => body.cancel().catch(() => {}),
    );
  }

  putBuffer(key: string, bytes: Uint8Array): Promise<{ size: number }> {
    return this.#write(key, () => {
      if (this.inner.putBuffer) return this.inner.putBuffer(key, bytes);
      return this.inner.put(key, new Blob([bytes as Uint8Array<ArrayBuffer>]).stream());
    }, () => Promise.resolve());
  }

  get(key: string, range?: ByteRange): Promise<StoredObject | null> {
    return this.inner.get(key, range);
  }
  head(key: string): Promise<ObjectInfo | null> {
    return this.inner.head(key);
  }
  delete(key: string): Promise<void> {
    return this.inner.delete(key);
  }
  list(prefix: string): Promise<ObjectInfo[]> {
    return this.inner.list(prefix);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export interface FleetOptions {
  state: FleetState;
  /** This node's token in leases (unique per process). */
  token: string;
  /** Lease term (ms); renewed every third of it. */
  leaseMs?: number;
  /** How often a node waiting on another's build looks again (ms). */
  pollMs?: number;
  /** Told of a lease this node took over from a holder that stopped renewing it. */
  onTakeover?: (lease: string) => void;
}

/**
 * Wraps the node's builder: a build runs only under the repository's fleet lease; a node that
 * finds the lease held waits for that build's manifest instead of building its own.
 */
export class FleetBuilder implements Builder {
  readonly #inner: Builder;
  readonly #store: PackStore;
  readonly #fleet: Required<Omit<FleetOptions, "onTakeover">> & Pick<FleetOptions, "onTakeover">;
  readonly #held = new Set<string>();
  /** Per repository: the `published` count this node's manifest was read at. */
  readonly seen = new Map<string, number>();
  #closed = false;

  constructor(inner: Builder, store: PackStore, fleet: FleetOptions) {
    this.#inner = inner;
    this.#store = store;
    this.#fleet = { leaseMs: DEFAULT_LEASE_MS, pollMs: 100, ...fleet };
  }

  /** Whether this node holds the build lease of `repoId` (asks the coordinator). */
  async holds(repoId: string): Promise<boolean> {
    return this.#held.has(repoId) &&
      await this.#fleet.state.holder(buildLease(repoId)) === this.#fleet.token;
  }

  /** Leases this node holds (repository ids). */
  held(): string[] {
    return [...this.#held];
  }

  async build(repo: RepoRef, auth: OriginAuth, previous: Manifest | null): Promise<Manifest> {
    return await this.#build(repo, auth, previous);
  }

  /** A coordinator call; its failure becomes a `CoordinatorUnavailableError` (503). */
  async #ask<T>(repo: RepoRef, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw new CoordinatorUnavailableError(
        `no snapshot build for ${repo.path} now: the fleet's coordinator is unreachable (${
          messageOf(error)
        })`,
        { cause: error },
      );
    }
  }

  async #build(repo: RepoRef, auth: OriginAuth, previous: Manifest | null): Promise<Manifest> {
    const { state, token, leaseMs, pollMs } = this.#fleet;
    const lease = buildLease(repo.id);
    const seen = this.seen.get(repo.id) ?? 0;
    // Waiting on others is bounded: by then a holder that died has long lost its lease.
    const deadline = Date.now() + 20 * leaseMs;
    let waited = false;
    while (!this.#closed) {
      const taken = await this.#publishedSince(repo, seen);
      if (taken) return taken;
      if (await this.#ask(repo, () => state.acquire(lease, token, leaseMs))) {
        // The last holder counts its publish before it lets the lease go, so a publish that
        // landed between the look above and this acquire shows now: take it, build nothing.
        const landed = await this.#publishedSince(repo, seen).catch(async (error) => {
          await state.release(lease, token).catch(() => {});
          throw error;
        });
        if (landed) {
          await state.release(lease, token).catch(() => {});
          return landed;
        }
        if (waited) this.#fleet.onTakeover?.(lease);
        return await this.#underLease(repo, auth, previous, lease);
      }
      waited = true;
      if (Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, pollMs));
    }
    throw new LeaseLostError(`no build lease for ${repo.path}: another node holds it`);
  }

  /** The manifest another node published since this node read its own at count `seen`. */
  async #publishedSince(repo: RepoRef, seen: number): Promise<Manifest | null> {
    const published = await this.#ask(
      repo,
      () => this.#fleet.state.count(publishedCounter(repo.id)),
    );
    if (published === seen) return null;
    const current = await readManifest(this.#store, repo);
    if (current) this.seen.set(repo.id, published);
    return current;
  }

  async #underLease(
    repo: RepoRef,
    auth: OriginAuth,
    previous: Manifest | null,
    lease: string,
  ): Promise<Manifest> {
    const { state, token, leaseMs } = this.#fleet;
    this.#held.add(repo.id);
    let lost = false;
    const renewal = setInterval(() => {
      state.renew(lease, token, leaseMs).then((ok) => {
        if (!ok) lost = true;
      }, () => {/* unreachable for now: the fence decides at publish */});
    }, Math.max(10, Math.floor(leaseMs / 3)));
    try {
      // Build on what the store holds now (another node may have published before this lease).
      const base = previous === null ? null : await readManifest(this.#store, repo) ?? previous;
      const manifest = await this.#inner.build(repo, auth, base);
      if (lost) throw new LeaseLostError(`the build lease of ${repo.path} was lost mid-build`);
      this.seen.set(repo.id, await state.incr(publishedCounter(repo.id)));
      return manifest;
    } finally {
      clearInterval(renewal);
      this.#held.delete(repo.id);
      await state.release(lease, token).catch(() => {});
    }
  }

  /** Gives up every lease this node holds (a drain: others take over at once). */
  async close(): Promise<void> {
    this.#closed = true;
    const { state, token } = this.#fleet;
    await Promise.allSettled(
      [...this.#held].map((id) => state.release(buildLease(id), token)),
    );
  }
}

export interface FleetCoordinatorDeps {
  store: PackStore;
  builder: FleetBuilder;
  clock: Clock;
  metrics?: Metrics;
  state: FleetState;
  onError?: (repo: RepoRef, err: unknown) => void;
  backoffMs?: number;
  onPublished?: (repo: RepoRef, manifest: Manifest) => void;
}

interface Generation {
  /** The `published` count its state was read at. */
  published: number;
  coordinator: InProcessCoordinator;
  busy: number;
}

/**
 * `SnapshotCoordinator` of one node of a fleet: this node's single-flight (an
 * `InProcessCoordinator` per repository state it read), renewed when the fleet's `published`
 * counter of the repository moves, with builds under the fleet lease (`FleetBuilder`).
 */
export class FleetCoordinator implements SnapshotCoordinator {
  readonly #deps: FleetCoordinatorDeps;
  readonly #repos = new Map<string, Generation>();

  constructor(deps: FleetCoordinatorDeps) {
    this.#deps = deps;
  }

  #fresh(published: number): Generation {
    const { store, builder, clock, metrics, onError, backoffMs, onPublished } = this.#deps;
    return {
      published,
      busy: 0,
      coordinator: new InProcessCoordinator({
        store,
        builder,
        clock,
        metrics,
        onError,
        backoffMs,
        onPublished,
      }),
    };
  }

  /** The repository's generation, renewed when the fleet published since it was read. */
  async #generation(repo: RepoRef): Promise<Generation> {
    let published: number | null = null;
    try {
      published = await this.#deps.state.count(publishedCounter(repo.id));
    } catch {
      // Coordinator unreachable: keep serving the snapshot this node knows.
    }
    let gen = this.#repos.get(repo.id);
    const own = this.#deps.builder.seen.get(repo.id);
    const stale = gen !== undefined && published !== null && published !== gen.published &&
      published !== own && gen.busy === 0;
    if (!gen || stale) {
      gen = this.#fresh(published ?? 0);
      this.#repos.set(repo.id, gen);
      if (published !== null) this.#deps.builder.seen.set(repo.id, published);
    } else if (published !== null && published === own) {
      gen.published = published;
    }
    return gen;
  }

  async #with<T>(repo: RepoRef, fn: (c: InProcessCoordinator) => Promise<T>): Promise<T> {
    const gen = await this.#generation(repo);
    gen.busy++;
    try {
      return await fn(gen.coordinator);
    } finally {
      gen.busy--;
    }
  }

  async manifest(repo: RepoRef): Promise<Manifest | null> {
    return await (await this.#generation(repo)).coordinator.manifest(repo);
  }

  async status(repo: RepoRef): Promise<SnapshotStatus> {
    return await (await this.#generation(repo)).coordinator.status(repo);
  }

  async schedule(repo: RepoRef, auth: OriginAuth, basis?: ScheduleBasis): Promise<void> {
    const gen = await this.#generation(repo);
    await gen.coordinator.schedule(repo, auth, basis);
    // A background build keeps this generation until it ends.
    gen.busy++;
    gen.coordinator.idle().finally(() => gen.busy--);
  }

  warm(repo: RepoRef, auth: OriginAuth, opts?: { rebuild?: boolean }): Promise<SnapshotStatus> {
    return this.#with(repo, (c) => c.warm(repo, auth, opts));
  }

  /** Runs `work` only if this node can take lease `name` (one sweeper for the fleet). */
  async exclusive(
    name: string,
    token: string,
    ttlMs: number,
    work: () => Promise<unknown>,
  ): Promise<boolean> {
    const { state } = this.#deps;
    if (!await state.acquire(name, token, ttlMs)) return false;
    // Renewed while the work runs (a long sweep keeps the lease; a dead node's lapses).
    const renewal = setInterval(() => {
      state.renew(name, token, ttlMs).catch(() => {});
    }, Math.max(10, Math.floor(ttlMs / 3)));
    try {
      await work();
    } finally {
      clearInterval(renewal);
      await state.release(name, token).catch(() => {});
    }
    return true;
  }

  async idle(): Promise<void> {
    await Promise.all([...this.#repos.values()].map((g) => g.coordinator.idle()));
  }

  /**
   * A store whose manifest writes are fenced by this node's build leases, and whose
   * response-cache entries are filled by one node of the fleet (a claim `fill:<key>` in `state`).
   */
  static fence(
    store: PackStore,
    builder: () => FleetBuilder,
    state: FleetState,
    token: string,
  ): FencedStore {
    return new FencedStore(store, (id) => builder().holds(id), {
      take: (key) => state.acquire(`fill:${key}`, token, FILL_CLAIM_MS),
      drop: (key) => state.release(`fill:${key}`, token),
    });
  }
}
