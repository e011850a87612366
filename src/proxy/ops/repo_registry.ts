/**
 * The repositories the edge knows, kept in the store (`registry/<repo id>.json`, a few hundred
 * bytes each): what the operator's page lists, what the per-repository metrics name, and what
 * store eviction orders by (least recently cloned first) and spares (packs whose signed URLs may
 * still be in use).
 *
 * Each process (Worker isolate) counts in memory and adds its counts to the stored record now and
 * then (read, add, write): at most every {@link FLUSH_INTERVAL_MS} per repository, at once when a
 * pin must reach the store, and when the Deno server stops. Concurrent isolates may lose a few
 * counts to each other; timestamps are merged by their maximum, so none goes back.
 *
 * In a fleet (Deno edges on one store with a coordinator: {@link SharedRegistry}), the records
 * are merged by the coordinator's own atomic operations instead: counts added, times at their
 * latest, no update lost; the store keeps a copy of each merged record (what a coordinator
 * restarted empty starts again from). Pins and evictions exclude each other there, fleet-wide: a
 * pin is refused while an eviction of the repository is under way (or began since the fetch
 * looked its snapshot up), and an eviction is refused while a pin of any node holds.
 *
 * A repository is registered once the origin served it a fetch (or the edge answered one from its
 * snapshot): paths nobody can clone never enter the store. At most {@link MAX_REPOS} are held.
 */
import { type Manifest, manifestPacks } from "../core/manifest.ts";
import type { RepoRef } from "../core/repo.ts";
import { getBytes, type PackStore, putBytes } from "../../storage/store.ts";
import { REGISTRY_PREFIX, registryKey } from "../core/store_layout.ts";

/** The edge's clock (`Clock` of core/deps.ts, which names this module's types). */
interface Clock {
  now(): number;
}

/** Counts of one process are added to the stored record at most this often. */
export const FLUSH_INTERVAL_MS = 10_000;
/** Repositories the registry holds at most (in memory and in the store). */
export const MAX_REPOS = 10_000;

/**
 * A pin set on one node is weighed against another node's clock: an eviction spares it this much
 * longer (the nodes' clocks may be seconds apart). Above the URLs' own leeway
 * (`FLEET_URL_LEEWAY_SECONDS`, core/signing.ts), so a URL still accepted finds its packs.
 */
export const FLEET_CLOCK_SLACK_MS = 30_000;
/** How long a fleet-wide eviction mark outlives a sweeper that died holding it (ms). */
export const EVICTING_MS = 5 * 60_000;

/**
 * The fleet's registry, kept by the coordination service (edge/deno/redis_fleet.ts) with its own
 * atomic operations. Every call may throw when the service cannot be reached.
 */
export interface SharedRegistry {
  /**
   * Adds `delta` to the counts of the shared record of `record.id` and merges `record`'s times
   * into it (as `merged` does: latest times, earliest first sight, the newest snapshot, a newer
   * eviction counted), creating it; the record as merged, and whether this call created it.
   * Null: the registry holds {@link MAX_REPOS} already. `batch`: the counts of one id are added
   * once, however often it is sent (a retry after an answer lost).
   */
  merge(
    record: RepoRecord,
    delta: Counts,
    batch?: string,
  ): Promise<{ record: RepoRecord; created: boolean } | null>;
  /** Every shared record (at most {@link MAX_REPOS}). */
  list(): Promise<RepoRecord[]>;
  /** Evictions of `id` begun fleet-wide. */
  epoch(id: string): Promise<number>;
  /**
   * Pins `id` until `untilMs` unless an eviction of it is under way, or one began since `epoch`
   * (null: not known); whether it did.
   */
  pin(id: string, untilMs: number, epoch: number | null): Promise<boolean>;
  /**
   * Marks `id` as being evicted (for `ttlMs` at most) unless a pin holds past `nowMs`; whether it
   * did. Counts the eviction in `id`'s epoch.
   */
  beginEviction(id: string, nowMs: number, ttlMs: number): Promise<boolean>;
  /** Ends the eviction mark of `id`. */
  endEviction(id: string): Promise<void>;
}

/** Evictions begun, as a fetch saw them when it looked the snapshot up. */
export interface EvictionEpoch {
  /** In this process. */
  local: number;
  /** Fleet-wide; null without a fleet or when the coordinator did not answer. */
  fleet: number | null;
}

/** How the edge served a fetch. */
export type FetchOutcome =
  | "answered" // from the snapshot alone
  | "rewritten" // the snapshot's packs by URI plus the origin's remainder
  | "cached" // through the response cache
  | "mirror" // by git's upload-pack on the edge's mirror (src/proxy/mirror)
  | "passthrough"; // the origin's answer as it came

/** What the registry keeps per repository. Times in ms since epoch. */
export interface RepoRecord {
  id: string;
  path: string;
  originUrl: string;
  firstSeenAt: number;
  /** The last fetch (clone or fetch) of the repository. */
  lastClonedAt: number | null;
  /** Pack URLs handed out for it may be valid until then: its packs are not evicted before. */
  pinnedUntil: number;
  /** Fetches, and of them those that got the snapshot's packs (answered or rewritten). */
  fetches: number;
  fromSnapshot: number;
  /** Of `fromSnapshot`, those the edge answered without the origin. */
  answered: number;
  /** Through the response cache. */
  cached: number;
  /** Pack bytes the edge served from its store: bytes the origin did not send. */
  packBytes: number;
  /** The snapshot last seen in force: when built, its packs and bytes. */
  builtAt: number | null;
  packs: number;
  snapshotBytes: number;
  /** When its snapshot was last evicted from the store, and how often it was. */
  evictedAt: number | null;
  evictions: number;
}

export type Counts = Pick<
  RepoRecord,
  "fetches" | "fromSnapshot" | "answered" | "cached" | "packBytes"
>;
const COUNT_KEYS: (keyof Counts)[] = ["fetches", "fromSnapshot", "answered", "cached", "packBytes"];

interface Entry {
  /** The record as last read from or written to the store, plus this process's news. */
  view: RepoRecord;
  /** Counts not yet added to the stored record. */
  delta: Counts;
  /** This process's counts since it started (what its metrics report). */
  local: Counts;
  /** In a fleet: counts sent whose answer did not come (sent again under the same batch). */
  unsent?: { batch: string; delta: Counts };
  /** News not yet in the store, and whether it must get there now (a pin). */
  dirty: boolean;
  urgent: boolean;
  flushedAt: number;
}

function zeroCounts(): Counts {
  return { fetches: 0, fromSnapshot: 0, answered: 0, cached: 0, packBytes: 0 };
}

function countsOf(r: RepoRecord): Counts {
  const out = zeroCounts();
  for (const k of COUNT_KEYS) out[k] = Number(r[k]) || 0;
  return out;
}

function newRecord(repo: Pick<RepoRef, "id" | "path" | "originUrl">, now: number): RepoRecord {
  return {
    id: repo.id,
    path: repo.path,
    originUrl: repo.originUrl,
    firstSeenAt: now,
    lastClonedAt: null,
    pinnedUntil: 0,
    ...zeroCounts(),
    builtAt: null,
    packs: 0,
    snapshotBytes: 0,
    evictedAt: null,
    evictions: 0,
  };
}

/** A stored record, or null when it is missing or not a record (then it is written afresh). */
export async function readRecord(store: PackStore, id: string): Promise<RepoRecord | null> {
  const bytes = await getBytes(store, registryKey(id)).catch(() => null);
  if (!bytes) return null;
  try {
    const r = JSON.parse(new TextDecoder().decode(bytes)) as RepoRecord;
    return typeof r === "object" && r !== null && r.id === id && typeof r.path === "string" &&
        typeof r.originUrl === "string"
      ? r
      : null;
  } catch {
    return null;
  }
}

/** `stored` with the news of `view` and `delta` (counts added, times at their latest). */
function merged(stored: RepoRecord, view: RepoRecord, delta: Counts): RepoRecord {
  const max = (a: number | null, b: number | null) =>
    a === null ? b : b === null ? a : Math.max(a, b);
  const out: RepoRecord = { ...stored };
  for (const k of COUNT_KEYS) out[k] = (stored[k] ?? 0) + delta[k];
  out.lastClonedAt = max(stored.lastClonedAt, view.lastClonedAt);
  out.pinnedUntil = Math.max(stored.pinnedUntil ?? 0, view.pinnedUntil);
  out.firstSeenAt = Math.min(stored.firstSeenAt ?? view.firstSeenAt, view.firstSeenAt);
  if (view.builtAt !== null && (stored.builtAt === null || view.builtAt >= stored.builtAt)) {
    out.builtAt = view.builtAt;
    out.packs = view.packs;
    out.snapshotBytes = view.snapshotBytes;
  }
  if (view.evictedAt !== null && (stored.evictedAt ?? 0) < view.evictedAt) {
    out.evictedAt = view.evictedAt;
    out.evictions = (stored.evictions ?? 0) + 1;
  }
  return out;
}

export class RepoRegistry {
  readonly #store: PackStore;
  readonly #clock: Clock;
  readonly #entries = new Map<string, Entry>();
  /** Repositories whose snapshot is being evicted: their packs are not handed out meanwhile. */
  readonly #evicting = new Set<string>();
  readonly #epochs = new Map<string, number>();
  #flushing: Promise<void> | null = null;

  readonly #shared: SharedRegistry | undefined;

  constructor(store: PackStore, clock: Clock, shared?: SharedRegistry) {
    this.#store = store;
    this.#clock = clock;
    this.#shared = shared;
  }

  #entry(repo: Pick<RepoRef, "id" | "path" | "originUrl">, create: boolean): Entry | undefined {
    let e = this.#entries.get(repo.id);
    if (!e && create && this.#entries.size < MAX_REPOS) {
      e = {
        view: newRecord(repo, this.#clock.now()),
        delta: zeroCounts(),
        local: zeroCounts(),
        dirty: true,
        urgent: false,
        flushedAt: -Infinity, // a new record is written at once
      };
      this.#entries.set(repo.id, e);
    }
    return e;
  }

  /**
   * Counts a fetch of `repo`. `served`: the origin (or the snapshot) answered it, which registers
   * a repository not known yet. `manifest`: the snapshot in force, when the fetch looked it up.
   */
  noteFetch(repo: RepoRef, outcome: FetchOutcome, served: boolean, manifest?: Manifest): void {
    const e = this.#entry(repo, served);
    if (!e) return;
    const now = this.#clock.now();
    e.view.lastClonedAt = now;
    const add = (k: keyof Counts) => {
      e.delta[k]++;
      e.view[k]++;
      e.local[k]++;
    };
    add("fetches");
    if (outcome === "answered" || outcome === "rewritten") add("fromSnapshot");
    if (outcome === "answered") add("answered");
    if (outcome === "cached") add("cached");
    if (manifest) this.#seeSnapshot(e, manifest);
    e.dirty = true;
  }

  /** Notes the snapshot in force for `repo` (after a build, or as a fetch saw it). */
  noteSnapshot(repo: RepoRef, manifest: Manifest): void {
    const e = this.#entry(repo, true);
    if (!e) return;
    this.#seeSnapshot(e, manifest);
    e.dirty = true;
  }

  #seeSnapshot(e: Entry, manifest: Manifest): void {
    if (e.view.builtAt !== null && e.view.builtAt > manifest.builtAt) return;
    const packs = manifestPacks(manifest);
    e.view.builtAt = manifest.builtAt;
    e.view.packs = packs.length;
    e.view.snapshotBytes = packs.reduce((n, p) => n + p.size, 0);
  }

  /** Counts pack bytes served for the repository with id `id` (known ones only). */
  notePackBytes(id: string, bytes: number): void {
    const e = this.#entries.get(id);
    if (!e) return;
    e.delta.packBytes += bytes;
    e.view.packBytes += bytes;
    e.local.packBytes += bytes;
    e.dirty = true;
  }

  /** Evictions of `id` begun by this process: a change tells that one began in between. */
  evictionEpoch(id: string): number {
    return this.#epochs.get(id) ?? 0;
  }

  /** The eviction epoch of `id` here and, in a fleet, fleet-wide (read before a lookup). */
  async epochOf(id: string): Promise<EvictionEpoch> {
    const local = this.evictionEpoch(id);
    if (!this.#shared) return { local, fleet: null };
    return { local, fleet: await this.#shared.epoch(id).catch(() => null) };
  }

  /**
   * In a fleet: pins `repo`'s packs until `untilMs` fleet-wide (after {@link pin} here), unless
   * an eviction of it is under way or began since `epoch`: then hand out nothing. A coordinator
   * that does not answer leaves the pin to this node (it reaches the coordinator with the next
   * flush; no sweep runs without the coordinator's lease meanwhile).
   */
  async pinFleet(repo: RepoRef, untilMs: number, epoch: EvictionEpoch): Promise<boolean> {
    if (!this.#shared) return true;
    try {
      return await this.#shared.pin(repo.id, untilMs, epoch.fleet);
    } catch {
      return true;
    }
  }

  /**
   * Whether `id`'s snapshot, looked up at eviction `epoch` ({@link evictionEpoch} then), may be
   * handed out: not while it is being evicted, nor when an eviction of it began since.
   */
  pinnable(id: string, epoch: number): boolean {
    return !this.#evicting.has(id) && this.evictionEpoch(id) === epoch;
  }

  /**
   * Pins `repo`'s packs until `untilMs` (the expiry of the URLs about to be handed out): eviction
   * spares them until then. False when it is not {@link pinnable} at `epoch`: hand out nothing.
   */
  pin(repo: RepoRef, untilMs: number, epoch = this.evictionEpoch(repo.id)): boolean {
    if (!this.pinnable(repo.id, epoch)) return false;
    const e = this.#entry(repo, true);
    if (e && e.view.pinnedUntil < untilMs) {
      e.view.pinnedUntil = untilMs;
      e.dirty = true;
      e.urgent = true;
    }
    return true;
  }

  /**
   * Marks `id` as being evicted unless its packs are pinned at `now` by this process (checked and
   * marked at once, so no fetch of this process hands them out in between). Returns whether it
   * may be evicted; call {@link endEviction} after.
   */
  async beginEviction(id: string, now: number): Promise<boolean> {
    if ((this.#entries.get(id)?.view.pinnedUntil ?? 0) > now) return false;
    this.#evicting.add(id);
    this.#epochs.set(id, this.evictionEpoch(id) + 1);
    if (this.#epochs.size > MAX_REPOS) this.#epochs.delete(this.#epochs.keys().next().value!);
    if (!this.#shared) return true;
    // In a fleet, a pin of any node spares it (weighed with slack for the nodes' clocks).
    let marked = false;
    try {
      marked = await this.#shared.beginEviction(id, now - FLEET_CLOCK_SLACK_MS, EVICTING_MS);
    } catch {
      marked = false; // cannot tell: spare it
    }
    if (!marked) this.#evicting.delete(id);
    return marked;
  }

  /** Ends an eviction; `evicted`: the snapshot is gone (noted in the record). */
  async endEviction(record: RepoRecord | null, id: string, evicted: boolean): Promise<void> {
    this.#evicting.delete(id);
    // The mark expires by itself should this fail.
    await this.#shared?.endEviction(id).catch(() => {});
    if (!evicted || !record) return;
    const e = this.#entry(record, true);
    if (!e) return;
    e.view.evictedAt = this.#clock.now();
    e.view.evictions++;
    e.view.builtAt = null;
    e.view.packs = 0;
    e.view.snapshotBytes = 0;
    e.dirty = true;
    e.urgent = true;
  }

  /** Whether some record has news due in the store (`flush` would write). */
  due(): boolean {
    const now = this.#clock.now();
    for (const e of this.#entries.values()) {
      if (e.dirty && (e.urgent || now - e.flushedAt >= FLUSH_INTERVAL_MS)) return true;
    }
    return false;
  }

  /**
   * Adds this process's news to the stored records: those due, or with `all` every one with news.
   * One flush at a time; a call during one waits for it and then flushes.
   */
  async flush(all = false): Promise<void> {
    while (this.#flushing) await this.#flushing;
    const run = this.#flushNow(all).finally(() => {
      this.#flushing = null;
    });
    this.#flushing = run;
    await run;
  }

  async #flushNow(all: boolean): Promise<void> {
    const now = this.#clock.now();
    for (const [id, e] of this.#entries) {
      if (!e.dirty || !(all || e.urgent || now - e.flushedAt >= FLUSH_INTERVAL_MS)) continue;
      const delta = e.delta;
      e.delta = zeroCounts();
      e.dirty = false;
      e.urgent = false;
      e.flushedAt = now;
      try {
        let record: RepoRecord;
        if (this.#shared) {
          // Counts whose answer was lost go again first, under their batch: added at most once.
          if (e.unsent) {
            await this.#mergeShared(e.view, e.unsent.delta, e.unsent.batch);
            e.unsent = undefined;
          }
          e.unsent = { batch: crypto.randomUUID(), delta };
          record = await this.#mergeShared(e.view, delta, e.unsent.batch);
          e.unsent = undefined;
        } else {
          const stored = await readRecord(this.#store, id);
          record = stored ? merged(stored, e.view, delta) : { ...e.view };
          await putBytes(
            this.#store,
            registryKey(id),
            new TextEncoder().encode(JSON.stringify(record)),
          );
        }
        // Keep this process's view at least as new as the store's.
        e.view = { ...record, pinnedUntil: Math.max(record.pinnedUntil, e.view.pinnedUntil) };
      } catch (error) {
        // Try again at the next flush: the counts go back (unless sent, then they go again).
        if (e.unsent?.delta !== delta) { for (const k of COUNT_KEYS) e.delta[k] += delta[k]; }
        e.dirty = true;
        throw error;
      }
    }
  }

  /**
   * Adds `view`'s news and `delta` to the coordinator's record; when this created the record (a
   * repository new to the fleet, or a coordinator restarted empty), the store's copy is added
   * once. The merged record is copied to the store.
   */
  async #mergeShared(view: RepoRecord, delta: Counts, batch: string): Promise<RepoRecord> {
    const shared = this.#shared!;
    const out = await shared.merge(view, delta, batch);
    if (!out) return { ...view }; // the fleet's registry is full: this node keeps its own view
    let record = out.record;
    if (out.created) {
      const copy = await readRecord(this.#store, view.id);
      if (copy) record = (await shared.merge(copy, countsOf(copy)))?.record ?? record;
    }
    await putBytes(
      this.#store,
      registryKey(view.id),
      new TextEncoder().encode(JSON.stringify(record)),
    ).catch(() => {/* a copy: the coordinator holds the record */});
    return record;
  }

  /**
   * Every record: the store's, with this process's news merged in, plus those not stored yet. At
   * most {@link MAX_REPOS}.
   */
  async list(): Promise<RepoRecord[]> {
    const out = new Map<string, RepoRecord>();
    // In a fleet, the coordinator's records; the store's copies of the others (all of them when
    // the coordinator does not answer).
    const shared = this.#shared ? await this.#shared.list().catch(() => null) : null;
    for (const r of shared ?? []) out.set(r.id, r);
    const keys = (await this.#store.list(REGISTRY_PREFIX)).slice(0, MAX_REPOS);
    const ids = keys.map((k) => k.key.slice(REGISTRY_PREFIX.length).replace(/\.json$/, ""))
      .filter((id) => !out.has(id));
    const records = await mapLimit(ids, 16, (id) => readRecord(this.#store, id));
    for (const r of records) if (r) out.set(r.id, r);
    for (const [id, e] of this.#entries) {
      const stored = out.get(id);
      const delta = { ...e.delta };
      if (e.unsent) { for (const k of COUNT_KEYS) delta[k] += e.unsent.delta[k]; }
      out.set(id, stored && e.dirty ? merged(stored, e.view, delta) : stored ?? e.view);
    }
    return [...out.values()];
  }

  /** This process's view of one record (null when it does not know the repository). */
  known(id: string): RepoRecord | null {
    return this.#entries.get(id)?.view ?? null;
  }

  /** Every repository this process knows: its counts since the process started, its snapshot. */
  traffic(): { path: string; counts: Readonly<Counts>; builtAt: number | null }[] {
    return [...this.#entries.values()].map((e) => ({
      path: e.view.path,
      counts: e.local,
      builtAt: e.view.builtAt,
    }));
  }
}

/** `f` over `items`, at most `limit` at a time, results in order. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  f: (item: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await f(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
