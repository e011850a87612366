/**
 * A bounded store (`--store-max-bytes`, the Worker's `STORE_MAX_BYTES`): when the snapshots in the
 * store (everything under `repos/`: packs, indexes, manifests, builds' temporary objects) exceed
 * the cap, whole snapshots are evicted, least recently cloned repository first (the registry's
 * `lastClonedAt`; the newest object's time for a repository it does not know).
 *
 * Spared: a repository whose packs are pinned (pack URLs handed out for it may not have expired:
 * the registry's `pinnedUntil`, in this process and as stored by others), one with a build under
 * way, and the snapshot written last when it was written after its repository's last clone and
 * less than `freshMs` ago (a snapshot just built serves at least once before it may go: evicting
 * it at once would have every clone pass through and rebuild). When what is spared keeps the store over its cap, the store is
 * full: {@link StoreEvictor.admit} refuses new builds (clones pass through, a warm says so) until a
 * sweep brings it under the cap again; logged once each way (`store.full`, `store.fits`). Its build counters (`state.json`) stay; its response-cache entries go with it. An
 * evicted repository's next clone finds the snapshot's packs gone: it passes through to the
 * origin and starts a fresh build, as after any lost pack. The response cache is not counted
 * against the cap: it has its own size.
 *
 * LFS objects (`lfs/objects/`, shared by every repository) count against the same cap and take
 * their turn in the same order: each by its last use in this process (served or filled), else
 * its write time. One an LFS URL handed out by this process may still fetch is spared until the
 * URL expires; a later download of an evicted object fills it from the origin again.
 */
import type { Logger } from "../core/log.ts";
import type { Clock, SnapshotCoordinator } from "../core/deps.ts";
import type { RepoRef } from "../core/repo.ts";
import type { Metrics } from "../core/metrics.ts";
import type { ObjectInfo, PackStore } from "../../storage/store.ts";
import type { RepoRecord, RepoRegistry } from "./repo_registry.ts";
import {
  CACHE_PREFIX,
  cachePrefix,
  REPOS_PREFIX as PREFIX,
  STATE_FILE as KEPT,
} from "../core/store_layout.ts";
import { LFS_PREFIX } from "../lfs/lfs_urls.ts";

/** A measurement of the store's use is reused for this long (metrics, the operator's page). */
export const USAGE_TTL_MS = 30_000;
/** Sweeps started by traffic (not by a build publishing) run at most this often. */
export const SWEEP_INTERVAL_MS = 30_000;
/** A snapshot written after its last clone is spared this long by default. */
export const DEFAULT_FRESH_MS = 5 * 60_000;

export interface StoreUsage {
  /** Bytes of snapshots in the store, when measured (ms since epoch). */
  bytes: number;
  at: number;
  /** The cap (0: none). */
  maxBytes: number;
  /** Bytes that were over the cap and pinned at the last sweep. */
  pinnedBytes: number;
  /** LFS objects in the store and their bytes (part of `bytes`). */
  lfsObjects?: number;
  lfsBytes?: number;
  /** Everything in the store, snapshots or not (measured with `bytes`). */
  totalBytes: number;
  /** `totalBytes` by kind: see {@link storeKind}. */
  byKind: Record<StoreKind, number>;
}

/** What a stored object is, for the store's use by kind. */
export type StoreKind =
  | "packs"
  | "indexes"
  | "snapshot-other"
  | "response-cache"
  | "lfs"
  | "other";

/** The kind of the object at `key`. */
export function storeKind(key: string): StoreKind {
  if (key.startsWith(CACHE_PREFIX)) return "response-cache";
  if (key.startsWith(LFS_PREFIX)) return "lfs";
  if (!key.startsWith(PREFIX)) return "other";
  if (key.endsWith(".pack")) return "packs";
  if (key.endsWith(".idx")) return "indexes";
  return "snapshot-other";
}

function zeroKinds(): Record<StoreKind, number> {
  return { packs: 0, indexes: 0, "snapshot-other": 0, "response-cache": 0, lfs: 0, other: 0 };
}

/** What eviction asks of the LFS objects' users in this process (`LfsState`). */
export interface LfsEvictionHooks {
  /** Until when (ms) a URL handed out may fetch `oid`; 0: none. */
  pinnedUntil(oid: string): number;
  /** When `oid` was last served or filled here (ms); 0: not known. */
  lastUsed(oid: string): number;
}

export interface EvictionReport {
  before: number;
  after: number;
  evicted: { id: string; path: string; bytes: number }[];
  /** Repositories over the cap that were spared, and why. */
  spared: { id: string; reason: "pinned" | "building" | "fresh" }[];
  /** Another node of the fleet holds the sweep lease: this one swept nothing. */
  elsewhere?: boolean;
}

export interface StoreEvictorDeps {
  store: PackStore;
  registry: RepoRegistry;
  coordinator: SnapshotCoordinator;
  clock: Clock;
  metrics: Metrics;
  /** The cap in bytes; 0 or absent: none (the store is only measured). */
  maxBytes?: number;
  /** A snapshot written after its last clone is spared this long (ms; default 5 min). */
  freshMs?: number;
  /** Where evictions are logged (`store.evict`, level info); none: not logged. */
  log?: Logger;
  /** LFS objects' pins and last uses; absent: LFS objects are not counted. */
  lfs?: LfsEvictionHooks;
  /** Called with each evicted repository's id (its git mirror goes with it). */
  onEvicted?: (repoId: string) => Promise<void>;
  /**
   * A fleet's one-sweeper lease: runs the sweep only if this node takes it (false: another node
   * sweeps). Every sweep goes through it: after a build, after a warm, after requests.
   */
  exclusive?: (work: () => Promise<unknown>) => Promise<boolean>;
  /**
   * A fleet's word on whether the store is full, kept by whichever node sweeps (`set` after each
   * sweep) and asked by every node before a build (`get`): the other nodes' builds wait too.
   */
  fleetFull?: { get(): Promise<boolean>; set(full: boolean): Promise<void> };
}

interface RepoUsage {
  bytes: number;
  newest: number;
  keys: string[];
  building: boolean;
}

export class StoreEvictor {
  readonly #deps: StoreEvictorDeps;
  #running: Promise<EvictionReport> | null = null;
  #again = false;
  #lastSweep = 0;
  /** The last sweep ended over the cap, everything left spared: new builds wait. */
  #full = false;
  #usage: StoreUsage | null = null;

  constructor(deps: StoreEvictorDeps) {
    this.#deps = deps;
  }

  get maxBytes(): number {
    return this.#deps.maxBytes ?? 0;
  }

  /**
   * Whether a build of `repo` may start now: not while the store is full (the last sweep could
   * not bring it under its cap: what is left is pinned, fresh or building). A refused build is
   * counted; the clone that asked passes through.
   */
  admit(repo: RepoRef): boolean | Promise<boolean> {
    void repo;
    const refused = () => {
      this.#deps.metrics.inc("gitedge_store_full_builds_skipped_total");
      return false;
    };
    if (this.#full) return refused();
    // In a fleet, the sweeper may be another node: its word (a coordinator away: none).
    const fleet = this.#deps.fleetFull;
    if (!fleet || this.maxBytes <= 0) return true;
    return fleet.get().then((full) => full ? refused() : true, () => true);
  }

  /** Whether the store is full (see {@link admit}). */
  get full(): boolean {
    return this.#full;
  }

  /** The store's use, measured at most every {@link USAGE_TTL_MS}. */
  async usage(): Promise<StoreUsage> {
    const now = this.#deps.clock.now();
    if (this.#usage && now - this.#usage.at < USAGE_TTL_MS) return this.#usage;
    const repos = await this.#measure();
    const lfs = await this.#measureLfs();
    let bytes = 0;
    for (const r of repos.values()) bytes += r.bytes;
    const lfsBytes = lfs.reduce((n, o) => n + o.size, 0);
    const byKind = zeroKinds();
    let totalBytes = 0;
    for (const obj of await this.#deps.store.list("")) {
      byKind[storeKind(obj.key)] += obj.size;
      totalBytes += obj.size;
    }
    this.#usage = {
      bytes: bytes + lfsBytes,
      at: now,
      maxBytes: this.maxBytes,
      pinnedBytes: this.#usage?.pinnedBytes ?? 0,
      totalBytes,
      byKind,
      lfsObjects: lfs.length,
      lfsBytes,
    };
    return this.#usage;
  }

  /**
   * A sweep unless one ran within {@link SWEEP_INTERVAL_MS} (for traffic: runs in the background
   * after requests); null when none is due or there is no cap.
   */
  sweepIfDue(): Promise<EvictionReport> | null {
    if (this.maxBytes <= 0) return null;
    if (this.#running || this.#deps.clock.now() - this.#lastSweep < SWEEP_INTERVAL_MS) return null;
    return this.sweep();
  }

  /**
   * Evicts snapshots until the store is under its cap (or only spared ones are left). One sweep
   * at a time: a call during one gets a sweep run right after it.
   */
  sweep(): Promise<EvictionReport> {
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    // A sweep that another node runs counts as run here too (no lease asked after each request).
    this.#lastSweep = this.#deps.clock.now();
    const run = (async () => {
      let report: EvictionReport = {
        before: 0,
        after: 0,
        evicted: [],
        spared: [],
        elsewhere: true,
      };
      const sweeps = async () => {
        do {
          this.#again = false;
          report = await this.#sweepOnce();
        } while (this.#again);
      };
      if (this.#deps.exclusive) await this.#deps.exclusive(sweeps);
      else await sweeps();
      return report;
    })().finally(() => {
      this.#running = null;
    });
    this.#running = run;
    return run;
  }

  async #measure(): Promise<Map<string, RepoUsage>> {
    const repos = new Map<string, RepoUsage>();
    for (const obj of await this.#deps.store.list(PREFIX)) {
      const [id, kind] = obj.key.slice(PREFIX.length).split("/");
      let r = repos.get(id);
      if (!r) repos.set(id, r = { bytes: 0, newest: 0, keys: [], building: false });
      r.bytes += obj.size;
      r.newest = Math.max(r.newest, obj.modified);
      if (kind === "tmp") r.building = true;
      if (obj.key !== `${PREFIX}${id}/${KEPT}`) r.keys.push(obj.key);
    }
    return repos;
  }

  /** The LFS objects in the store (none when LFS objects are not counted). */
  async #measureLfs(): Promise<ObjectInfo[]> {
    if (!this.#deps.lfs) return [];
    return (await this.#deps.store.list(LFS_PREFIX)).filter((o) => !o.key.includes("/tmp"));
  }

  async #sweepOnce(): Promise<EvictionReport> {
    const { store, registry, clock, metrics } = this.#deps;
    const max = this.maxBytes;
    this.#lastSweep = clock.now();
    const repos = await this.#measure();
    const lfsObjects = await this.#measureLfs();
    let total = 0;
    for (const r of repos.values()) total += r.bytes;
    for (const o of lfsObjects) total += o.size;
    let lfsBytes = lfsObjects.reduce((n, o) => n + o.size, 0);
    let lfsCount = lfsObjects.length;
    const report: EvictionReport = { before: total, after: total, evicted: [], spared: [] };
    let pinnedBytes = 0;
    if (max > 0 && total > max) {
      const records = new Map((await registry.list()).map((r) => [r.id, r]));
      const lastUse = (id: string) => records.get(id)?.lastClonedAt ?? repos.get(id)!.newest;
      const oidOf = (key: string) => key.slice(key.lastIndexOf("/") + 1);
      const lfsUse = (o: ObjectInfo) =>
        Math.max(this.#deps.lfs!.lastUsed(oidOf(o.key)), o.modified);
      const order: ({ id: string; at: number } | { object: ObjectInfo; at: number })[] = [
        ...[...repos.keys()].map((id) => ({ id, at: lastUse(id) })),
        ...lfsObjects.map((object) => ({ object, at: lfsUse(object) })),
      ].sort((a, b) => a.at - b.at);
      // The snapshot written last, when not cloned since and younger than freshMs, serves before
      // it may go (older unserved ones go in their turn, least recently used first). Stores that
      // keep whole seconds (S3's LastModified) can show two written last: each is spared.
      const freshMs = this.#deps.freshMs ?? DEFAULT_FRESH_MS;
      const now = clock.now();
      let lastAt = 0;
      for (const r of repos.values()) lastAt = Math.max(lastAt, r.newest);
      const fresh = new Set(
        [...repos.entries()].filter(([id, r]) =>
          r.newest === lastAt && (records.get(id)?.lastClonedAt ?? 0) < r.newest &&
          now - r.newest < freshMs
        ).map(([id]) => id),
      );
      for (const item of order) {
        if (total <= max) break;
        if ("object" in item) {
          const oid = oidOf(item.object.key);
          if (this.#deps.lfs!.pinnedUntil(oid) > clock.now()) {
            report.spared.push({ id: oid, reason: "pinned" });
            pinnedBytes += item.object.size;
            continue;
          }
          await store.delete(item.object.key);
          total -= item.object.size;
          lfsBytes -= item.object.size;
          lfsCount--;
          report.evicted.push({ id: oid, path: `lfs:${oid}`, bytes: item.object.size });
          metrics.inc("gitedge_store_evictions_total");
          metrics.inc("gitedge_store_evicted_bytes_total", item.object.size);
          metrics.inc("gitedge_lfs_evictions_total");
          this.#deps.log?.log("info", "store.evict", {
            lfsObject: oid,
            bytes: item.object.size,
            lastUsedAt: new Date(item.at).toISOString(),
            storeBytes: report.before,
            maxBytes: max,
          });
          continue;
        }
        const id = item.id;
        const usage = repos.get(id)!;
        if (usage.keys.length === 0) continue;
        const record = records.get(id) ?? null;
        const now = clock.now();
        if (usage.building || (record && await this.#building(record))) {
          report.spared.push({ id, reason: "building" });
          continue;
        }
        if (fresh.has(id)) {
          report.spared.push({ id, reason: "fresh" });
          pinnedBytes += usage.bytes;
          continue;
        }
        if ((record?.pinnedUntil ?? 0) > now || !await registry.beginEviction(id, now)) {
          report.spared.push({ id, reason: "pinned" });
          pinnedBytes += usage.bytes;
          continue;
        }
        let freed = 0;
        try {
          for (const key of usage.keys) {
            const info = await store.head(key);
            await store.delete(key);
            freed += info?.size ?? 0;
          }
          // Its stored answers go too (cold as well): its next clone reaches the origin, which
          // starts the rebuild (an answer from the response cache starts none).
          for (const obj of await store.list(cachePrefix(id))) await store.delete(obj.key);
        } finally {
          await registry.endEviction(record, id, freed > 0);
        }
        total -= freed;
        await this.#deps.onEvicted?.(id).catch(() => {});
        const path = record?.path ?? id;
        report.evicted.push({ id, path, bytes: freed });
        metrics.inc("gitedge_store_evictions_total");
        metrics.inc("gitedge_store_evicted_bytes_total", freed);
        const last = record?.lastClonedAt ? new Date(record.lastClonedAt).toISOString() : "never";
        this.#deps.log?.log("info", "store.evict", {
          message:
            `gitedge: evicted the snapshot of ${path} (${freed} bytes, last cloned ${last}) ` +
            `to keep the store under its cap`,
          repo: path,
          bytes: freed,
          lastClonedAt: last,
          storeBytes: report.before,
          maxBytes: max,
        });
      }
      if (report.evicted.length > 0) await registry.flush(true).catch(() => {});
    }
    report.after = total;
    const full = max > 0 && total > max;
    // The fleet's other nodes learn it from the sweeper (every sweep: a dead sweeper's word lapses).
    await this.#deps.fleetFull?.set(full).catch(() => {});
    if (full !== this.#full) {
      this.#full = full;
      this.#deps.log?.log(full ? "warn" : "info", full ? "store.full" : "store.fits", {
        message: full
          ? `gitedge: the store is over its cap by what is pinned or just built: new snapshot ` +
            `builds wait (clones pass through) until it fits`
          : "gitedge: the store fits its cap again: snapshot builds resume",
        storeBytes: total,
        maxBytes: max,
        spared: report.spared.map((s) => s.reason),
      });
    }
    // The next look measures the whole store again (by kind), with this sweep's pinned bytes.
    this.#usage = {
      bytes: total,
      at: 0,
      maxBytes: max,
      pinnedBytes,
      totalBytes: 0,
      byKind: zeroKinds(),
      lfsObjects: lfsCount,
      lfsBytes,
    };
    return report;
  }

  /** Whether the coordinator has a build of `record`'s repository under way. */
  async #building(record: RepoRecord): Promise<boolean> {
    const repo: RepoRef = { id: record.id, path: record.path, originUrl: record.originUrl };
    try {
      return (await this.#deps.coordinator.status(repo)).state === "building";
    } catch {
      return true; // cannot tell: spare it
    }
  }
}
