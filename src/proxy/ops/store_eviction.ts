/**
 * A bounded store (`--store-max-bytes`, the Worker's `STORE_MAX_BYTES`): when the snapshots in the
 * store (everything under `repos/`: packs, indexes, manifests, builds' temporary objects) exceed
 * the cap, whole snapshots are evicted, least recently cloned repository first (the registry's
 * `lastClonedAt`; the newest object's time for a repository it does not know).
 *
 * Spared: a repository whose packs are pinned (pack URLs handed out for it may not have expired:
 * the registry's `pinnedUntil`, in this process and as stored by others) and one with a build
 * under way. Its build counters (`state.json`) stay; its response-cache entries go with it. An
 * evicted repository's next clone finds the snapshot's packs gone: it passes through to the
 * origin and starts a fresh build, as after any lost pack. The response cache is not counted
 * against the cap: it has its own size.
 */
import type { Logger } from "../core/log.ts";
import type { Clock, SnapshotCoordinator } from "../core/deps.ts";
import type { RepoRef } from "../core/repo.ts";
import type { Metrics } from "../core/metrics.ts";
import type { PackStore } from "../../storage/store.ts";
import type { RepoRecord, RepoRegistry } from "./repo_registry.ts";
import { CACHE_PREFIX } from "../core/response_cache.ts";

const PREFIX = "repos/";
/** What eviction keeps of a repository: its build counters. */
const KEPT = "state.json";
/** A measurement of the store's use is reused for this long (metrics, the operator's page). */
export const USAGE_TTL_MS = 30_000;
/** Sweeps started by traffic (not by a build publishing) run at most this often. */
export const SWEEP_INTERVAL_MS = 30_000;

export interface StoreUsage {
  /** Bytes of snapshots in the store, when measured (ms since epoch). */
  bytes: number;
  at: number;
  /** The cap (0: none). */
  maxBytes: number;
  /** Bytes that were over the cap and pinned at the last sweep. */
  pinnedBytes: number;
}

export interface EvictionReport {
  before: number;
  after: number;
  evicted: { id: string; path: string; bytes: number }[];
  /** Repositories over the cap that were spared, and why. */
  spared: { id: string; reason: "pinned" | "building" }[];
}

export interface StoreEvictorDeps {
  store: PackStore;
  registry: RepoRegistry;
  coordinator: SnapshotCoordinator;
  clock: Clock;
  metrics: Metrics;
  /** The cap in bytes; 0 or absent: none (the store is only measured). */
  maxBytes?: number;
  /** Where evictions are logged (`store.evict`, level info); none: not logged. */
  log?: Logger;
  /** Called with each evicted repository's id (its git mirror goes with it). */
  onEvicted?: (repoId: string) => Promise<void>;
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
  #usage: StoreUsage | null = null;

  constructor(deps: StoreEvictorDeps) {
    this.#deps = deps;
  }

  get maxBytes(): number {
    return this.#deps.maxBytes ?? 0;
  }

  /** The store's use, measured at most every {@link USAGE_TTL_MS}. */
  async usage(): Promise<StoreUsage> {
    const now = this.#deps.clock.now();
    if (this.#usage && now - this.#usage.at < USAGE_TTL_MS) return this.#usage;
    const repos = await this.#measure();
    let bytes = 0;
    for (const r of repos.values()) bytes += r.bytes;
    this.#usage = { bytes, at: now, maxBytes: this.maxBytes, pinnedBytes: 0 };
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
    const run = (async () => {
      let report: EvictionReport;
      do {
        this.#again = false;
        report = await this.#sweepOnce();
      } while (this.#again);
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

  async #sweepOnce(): Promise<EvictionReport> {
    const { store, registry, clock, metrics } = this.#deps;
    const max = this.maxBytes;
    this.#lastSweep = clock.now();
    const repos = await this.#measure();
    let total = 0;
    for (const r of repos.values()) total += r.bytes;
    const report: EvictionReport = { before: total, after: total, evicted: [], spared: [] };
    let pinnedBytes = 0;
    if (max > 0 && total > max) {
      const records = new Map((await registry.list()).map((r) => [r.id, r]));
      const lastUse = (id: string) => records.get(id)?.lastClonedAt ?? repos.get(id)!.newest;
      const order = [...repos.keys()].sort((a, b) => lastUse(a) - lastUse(b));
      for (const id of order) {
        if (total <= max) break;
        const usage = repos.get(id)!;
        if (usage.keys.length === 0) continue;
        const record = records.get(id) ?? null;
        const now = clock.now();
        if (usage.building || (record && await this.#building(record))) {
          report.spared.push({ id, reason: "building" });
          continue;
        }
        if ((record?.pinnedUntil ?? 0) > now || !registry.beginEviction(id, now)) {
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
          for (const obj of await store.list(`${CACHE_PREFIX}${id}/`)) await store.delete(obj.key);
        } finally {
          registry.endEviction(record, id, freed > 0);
        }
        total -= freed;
        await this.#deps.onEvicted?.(id).catch(() => {});
        const path = record?.path ?? id;
        report.evicted.push({ id, path, bytes: freed });
        metrics.inc("gitedge_store_evictions_total");
        metrics.inc("gitedge_store_evicted_bytes_total", freed);
        const last = record?.lastClonedAt ? new Date(record.lastClonedAt).toISOString() : "never";
        this.#deps.log?.log("info", "store.evict", {
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
    this.#usage = { bytes: total, at: clock.now(), maxBytes: max, pinnedBytes };
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
