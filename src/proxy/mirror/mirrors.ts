/**
 * The edge's git mirrors (one bare repository per repository, where a `git` binary runs: the Deno
 * server), the runtime-free part: which wants a mirror holds, keeping it current single-flight,
 * and what it saved. The runtime carries out the git work behind {@link MirrorHost}
 * (edge/deno/mirror.ts); the fetch path uses {@link Mirrors} (src/proxy/fetch/mirror_fetch.ts).
 *
 * A mirror is seeded from the snapshot's stored packs (no second full transfer from the origin)
 * and brought current by incremental fetches from the origin with the credential of a caller the
 * origin just authorised (in memory only, for the length of that fetch). Concurrent requests that
 * need an update join the one running: a new state of the repository costs the origin one
 * incremental fetch, however many runners ask for it.
 */
import type { Manifest } from "../core/manifest.ts";
import type { OriginAuth, RepoRef } from "../core/repo.ts";
import { type CollectedFamily, oneSeries } from "../core/metrics.ts";
import type { Logger } from "../core/log.ts";

/** Why a mirror cannot answer a repository that has no snapshot yet (nothing to seed it from). */
export const NO_SNAPSHOT_TO_SEED = "no snapshot to seed";

/**
 * Thrown by a {@link MirrorHost} that finds the mirror damaged (an object its refs reach is missing
 * or unreadable): {@link Mirrors} discards it, and the next fetch that needs it seeds a new one.
 */
export class MirrorDamagedError extends Error {
  override name = "MirrorDamagedError";
}

/** What the runtime answers for one upload-pack run on the mirror. */
export type MirrorAnswer =
  /** The answer (a protocol-v2 fetch response) as git's `upload-pack` writes it. */
  | { ok: true; body: ReadableStream<Uint8Array> }
  /** upload-pack failed before its answer was handed out (a damaged mirror): nothing was sent. */
  | { ok: false; reason: string };

/** What the caller of an update knows that spares the origin a request. */
export interface UpdateHint {
  /**
   * The origin's refs (ref → id) as it just listed them to the caller: the update names the
   * mirror's branches and tags from them instead of asking the origin for its own listing (and
   * prunes nothing: a listing may cover some prefixes only).
   */
  refs?: Record<string, string>;
  /**
   * Told the origin's word on the credential, from the update's `fetch`: 200 once its answer
   * proved whole, 401/403 when refused.
   */
  onOriginStatus?: (status: number) => void;
}

/** The origin refused an update's request (its HTTP status: 401 and 403 are about the caller). */
export class MirrorUpdateRefused extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** One mirror as the operator sees it. */
export interface MirrorStatus {
  /** `none`: no mirror; `ready`: serving; `updating`: serving, with a seed or update running. */
  state: "none" | "ready" | "updating";
  /** Bytes on disk. */
  bytes: number;
  /** Last successful update from the origin (ms since epoch), or null. */
  updatedAt: number | null;
}

/** The git work, done by the runtime (edge/deno/mirror.ts). Never given a credential to keep. */
export interface MirrorHost {
  /** Whether `repo` has a mirror (seeded and not discarded). */
  exists(repo: RepoRef): Promise<boolean>;
  /** The ids among `oids` the mirror lacks (`git cat-file --batch-check`). */
  missing(repo: RepoRef, oids: readonly string[]): Promise<string[]>;
  /**
   * Creates the mirror from the snapshot `manifest`'s stored packs (indexed locally, refs set
   * from its tips); nothing from the origin. A failure leaves no mirror.
   */
  seed(repo: RepoRef, manifest: Manifest): Promise<void>;
  /**
   * Brings the mirror current with one `fetch` from the origin with `auth` (held for the length
   * of the call, never written or logged): wants are `oids` the mirror lacks and, with no
   * `hint.refs`, every branch and tag tip of the origin's own `ls-refs` (one request more; the
   * refs it lacks are then pruned); haves are the mirror's tips. The pack is indexed into the
   * mirror, then the branches and tags are set in one transaction to the listing's ids the mirror
   * holds. A failure (refused, killed, disk full) leaves the mirror serving as it was.
   */
  update(
    repo: RepoRef,
    auth: OriginAuth,
    oids: readonly string[],
    hint?: UpdateHint,
  ): Promise<void>;
  /**
   * Runs `git upload-pack --stateless-rpc` (protocol v2) on `request`. A run that fails before
   * its answer is handed out answers `ok: false`.
   */
  serve(repo: RepoRef, request: Uint8Array): Promise<MirrorAnswer>;
  /**
   * A self-contained pack (`ofs-delta`, never thin) of the objects `wants` reach minus those
   * `haves` reach, written whole (reused entries checked against their CRC) before its first
   * byte is handed out; throws when git cannot write it (an object the mirror should hold is
   * missing or damaged).
   */
  pack(
    repo: RepoRef,
    wants: readonly string[],
    haves: readonly string[],
  ): Promise<ReadableStream<Uint8Array>>;
  /** Removes the mirror of the repository with id `repoId` (damaged, or evicted). */
  discard(repoId: string): Promise<void>;
  /** Bytes of the mirror on disk (0: none). */
  size(repo: RepoRef): Promise<number>;
  /**
   * When the mirror's refs last changed (its seed or last update; ms since epoch), or null: what
   * the operator sees as its last update after a restart (the process keeps it otherwise).
   */
  refsChangedAt?(repo: RepoRef): Promise<number | null>;
  /** Every mirror on disk: its repository id and bytes. */
  list(): Promise<{ id: string; bytes: number }[]>;
}

/** Bounds of {@link Mirrors}. */
export interface MirrorLimits {
  /** The clock (ms since epoch). */
  now?: () => number;
  /** Most upload-pack runs at once; beyond, fetches go as with no mirror. Default 16. */
  maxServes?: number;
  /**
   * Most bytes all mirrors may take on disk; beyond, the least recently used are discarded after
   * a seed or update (never the one just brought current). 0: no cap of their own (a mirror
   * still goes when its repository's snapshot is evicted). Default 0.
   */
  maxBytes?: number;
  /** Where layers packed from mirrors, and mirrors discarded, are logged. */
  log?: Logger;
}

/** What {@link Mirrors.ensure} found. */
export type EnsureResult =
  /** Every want is in the mirror (after an update, if one was needed). */
  | { ready: true; updated: boolean }
  /** The mirror cannot answer: no snapshot to seed it from, or the update failed or fell short. */
  | { ready: false; reason: string };

/** Bounds of what the operator page and metrics keep per repository. */
const MAX_TRACKED = 4096;
/** Listings kept at once (one per repository), and how long one names an update's refs (ms). */
const MAX_LISTINGS = 256;
/** Bytes of all listings kept (each counted at its names plus 64 per ref). */
const MAX_LISTINGS_BYTES = 32 << 20;
export const LISTING_MS = 60_000;

/** Options of {@link Mirrors.ensure}. */
export interface EnsureOptions {
  /** The origin's refs as just listed to this caller (else a recent {@link Mirrors.noteListing}). */
  refs?: Record<string, string>;
  /** Told the origin's word on `auth` if this call runs an update ({@link UpdateHint}). */
  onOriginStatus?: (status: number) => void;
}

/**
 * The mirrors of one process: single-flight seeding and updates per repository over a
 * {@link MirrorHost}, and their state for the operator.
 */
export class Mirrors {
  readonly host: MirrorHost;
  /** Repository id → the seed or update running for it (joined by concurrent requests). */
  readonly #running = new Map<string, Promise<void>>();
  readonly #updatedAt = new Map<string, number>();
  /** Repository id → the origin's refs as last listed to a caller ({@link noteListing}). */
  readonly #listings = new Map<
    string,
    { refs: Record<string, string>; at: number; bytes: number }
  >();
  #listingBytes = 0;
  /** Repository id → the listing last set into its mirror's refs (by an update or a sync). */
  readonly #synced = new Map<string, Record<string, string>>();
  /** Repository id → the work a fetch waits for ({@link track}). */
  readonly #tracked = new Map<string, Promise<void>>();
  readonly #now: () => number;
  readonly #maxServes: number;
  readonly maxBytes: number;
  readonly #log: Logger | undefined;
  /** Repository id → last time a fetch needed its mirror (ms). */
  readonly #usedAt = new Map<string, number>();
  #serving = 0;
  /** Repository id → builtAt of the oldest snapshot its mirror may be seeded from. */
  readonly #sealed = new Map<string, number>();
  /** Upload-pack answers served from mirrors, and their bytes (what the origin did not send). */
  served = 0;
  servedBytes = 0;
  updates = 0;
  updateFailures = 0;
  discards = 0;
  /** Mirrors discarded for the cap ({@link MirrorLimits.maxBytes}). */
  evictions = 0;
  /** Snapshot layers (and first builds) packed from a mirror, and their bytes. */
  layers = 0;
  layerBytes = 0;
  /** Told of each chunk of a layer packed from a mirror (the bytes the origin did not send). */
  onLayerBytes?: (repoId: string, bytes: number) => void;

  constructor(host: MirrorHost, limits: MirrorLimits = {}) {
    this.host = host;
    this.#now = limits.now ?? (() => Date.now());
    this.#maxServes = limits.maxServes ?? 16;
    this.maxBytes = limits.maxBytes ?? 0;
    this.#log = limits.log;
  }

  /**
   * The mirror's answer to `request` (see {@link MirrorHost.serve}), counted; null when
   * {@link MirrorLimits.maxServes} runs are under way (the fetch then goes as with no mirror).
   */
  async serve(repo: RepoRef, request: Uint8Array): Promise<MirrorAnswer | null> {
    if (this.#serving >= this.#maxServes) return null;
    this.#serving++;
    let answer: MirrorAnswer;
    try {
      answer = await this.host.serve(repo, request);
    } catch (error) {
      this.#serving--;
      throw error;
    }
    if (!answer.ok) {
      this.#serving--;
      return answer;
    }
    this.served++;
    let released = false;
    const release = () => {
      if (!released) this.#serving--;
      released = true;
    };
    const reader = answer.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      pull: async (c) => {
        try {
          const r = await reader.read();
          if (r.done) {
            release();
            return c.close();
          }
          this.servedBytes += r.value.byteLength;
          c.enqueue(r.value);
        } catch (error) {
          release();
          c.error(error);
        }
      },
      cancel: async (reason) => {
        release();
        await reader.cancel(reason).catch(() => {});
      },
    }, { highWaterMark: 0 });
    return { ok: true, body };
  }

  /**
   * Makes sure `repo`'s mirror holds every one of `wants`: seeds it from `manifest` when there is
   * none, and when wants are missing, runs (or joins) one incremental fetch from the origin with
   * `auth`, then looks again. Never throws: a failure is `ready: false`.
   */
  async ensure(
    repo: RepoRef,
    wants: readonly string[],
    auth: OriginAuth,
    manifest: () => Promise<Manifest | null>,
    opts: EnsureOptions = {},
  ): Promise<EnsureResult> {
    try {
      return await this.#ensure(repo, wants, auth, manifest, opts);
    } catch (error) {
      if (error instanceof MirrorDamagedError) {
        this.#log?.log("warn", "mirror.discard", { repo: repo.path, reason: error.message });
        await this.discard(repo.id).catch(() => {});
        return { ready: false, reason: `damaged: ${error.message}` };
      }
      // A mirror discarded under the request (its `cat-file` failed), say.
      return { ready: false, reason: message(error) };
    }
  }

  async #ensure(
    repo: RepoRef,
    wants: readonly string[],
    auth: OriginAuth,
    manifest: () => Promise<Manifest | null>,
    opts: EnsureOptions,
  ): Promise<EnsureResult> {
    this.#touch(repo.id);
    try {
      if (!await this.host.exists(repo)) {
        await this.#once(repo, async () => {
          if (await this.host.exists(repo)) return;
          const m = await manifest();
          if (!m) throw new NoSeedError();
          if (this.#tooOld(repo, m)) throw new Error("snapshot older than the mirror's discard");
          this.#synced.delete(repo.id);
          await this.host.seed(repo, m);
          // The snapshot may be older than the listing the caller was just given: its refs,
          // and the tips the snapshot lacks, are brought in now.
          const refs = opts.refs ?? this.#takeListing(repo.id);
          if (refs) {
            await this.host.update(repo, auth, [], { refs, onOriginStatus: opts.onOriginStatus })
              .then(() => this.#noteUpdate(repo), () => {});
          }
          await this.#enforceCap(repo.id);
        });
      }
    } catch (error) {
      if (error instanceof NoSeedError) return { ready: false, reason: NO_SNAPSHOT_TO_SEED };
      return { ready: false, reason: `seed failed: ${message(error)}` };
    }
    let missing = await this.host.missing(repo, wants);
    if (missing.length === 0) return { ready: true, updated: false };
    // One update at a time per repository: a request that finds one running waits for it and
    // looks again, so a burst of runners in one new state costs the origin one fetch.
    const running = this.#running.get(repo.id);
    if (running) {
      await running.catch(() => {});
      missing = await this.host.missing(repo, wants);
      if (missing.length === 0) return { ready: true, updated: true };
    }
    // Twice at most: a run this call joined (another caller's update, a seed, a sync of refs)
    // may not have been for these wants, or may have failed with that caller's credential.
    for (let attempt = 0; attempt < 2; attempt++) {
      let ran = false;
      try {
        // `missing` was read just now (nothing awaited since): a run under way is joined.
        await this.#once(repo, async () => {
          ran = true;
          const refs = opts.refs ?? this.#takeListing(repo.id);
          // The mirror's refs change: whatever listing was set before no longer stands.
          this.#synced.delete(repo.id);
          try {
            await this.host.update(repo, auth, missing, {
              refs,
              onOriginStatus: opts.onOriginStatus,
            });
          } catch (error) {
            this.updateFailures++;
            throw error;
          }
          if (refs) this.#noteSynced(repo.id, refs);
          this.updates++;
          this.#noteUpdate(repo);
          await this.#enforceCap(repo.id);
        });
      } catch (error) {
        if (error instanceof MirrorDamagedError) {
          // Discarded by the call whose run found it.
          if (ran) await this.discard(repo.id);
          return { ready: false, reason: `damaged, discarded: ${message(error)}` };
        }
        if (ran) return { ready: false, reason: `update failed: ${message(error)}` };
      }
      missing = await this.host.missing(repo, wants);
      if (missing.length === 0) return { ready: true, updated: true };
      if (ran) {
        // This call's own update asked the origin for these and indexed its whole answer: a want
        // still missing is one the mirror claimed to reach (a have) and cannot read. Damaged:
        // discarded, and a later fetch seeds it afresh.
        await this.discard(repo.id);
        return { ready: false, reason: "the mirror lacks objects it should hold: discarded" };
      }
    }
    return { ready: false, reason: "wants still missing after the updates joined" };
  }

  /**
   * Notes the origin's branches and tags (ref → id) as it just listed them to a caller, for the
   * next update of `repo` within {@link LISTING_MS} to name the mirror's refs by (sparing the
   * origin a listing of the update's own). Kept in memory, one per repository, bounded.
   */
  noteListing(repo: RepoRef, refs: Record<string, string>): void {
    this.#dropListing(repo.id);
    let bytes = 0;
    for (const ref in refs) bytes += ref.length + 64;
    if (bytes > MAX_LISTINGS_BYTES) return;
    this.#listings.set(repo.id, { refs, at: this.#now(), bytes });
    this.#listingBytes += bytes;
    while (this.#listings.size > MAX_LISTINGS || this.#listingBytes > MAX_LISTINGS_BYTES) {
      this.#dropListing(this.#listings.keys().next().value!);
    }
  }

  #dropListing(repoId: string): void {
    const noted = this.#listings.get(repoId);
    if (!noted) return;
    this.#listings.delete(repoId);
    this.#listingBytes -= noted.bytes;
  }

  /**
   * Sets `repo`'s branches and tags to `refs` (the origin's listing just given to a caller) where
   * the mirror holds their objects (it holds every listed tip: the origin is asked nothing); in
   * turn with updates. Never throws.
   */
  async syncRefs(repo: RepoRef, refs: Record<string, string>, auth: OriginAuth): Promise<void> {
    // The same listing as the one last set (a burst of runners in one state): nothing to do.
    if (sameRefs(this.#synced.get(repo.id), refs)) return;
    try {
      // `auth`: the caller's, should the mirror lack a listed tip by now (discarded and seeded
      // again meanwhile): the update then fetches it as that caller.
      await this.#once(repo, async () => {
        await this.host.update(repo, auth, [], { refs });
        this.#noteSynced(repo.id, refs);
      });
    } catch (error) {
      // The next update sets them; a mirror that cannot read itself goes.
      if (error instanceof MirrorDamagedError) await this.discard(repo.id);
    }
  }

  /** Notes `refs` as the listing last set into `repoId`'s mirror (bounded in repositories). */
  #noteSynced(repoId: string, refs: Record<string, string>): void {
    this.#synced.delete(repoId);
    this.#synced.set(repoId, refs);
    if (this.#synced.size > MAX_LISTINGS) this.#synced.delete(this.#synced.keys().next().value!);
  }

  /** The listing noted for `repoId` if recent (used once), else undefined. */
  #takeListing(repoId: string): Record<string, string> | undefined {
    const noted = this.#listings.get(repoId);
    this.#dropListing(repoId);
    if (!noted || this.#now() - noted.at > LISTING_MS) return undefined;
    return noted.refs;
  }

  /**
   * Work on `repo`'s mirror that a fetch must wait for before it looks at it (a listing being
   * read to start an update, say); dropped once settled.
   */
  track(repo: RepoRef, work: Promise<void>): void {
    const settled = work.catch(() => {}).finally(() => {
      if (this.#tracked.get(repo.id) === settled) this.#tracked.delete(repo.id);
    });
    this.#tracked.set(repo.id, settled);
    if (this.#tracked.size > MAX_LISTINGS) this.#tracked.delete(this.#tracked.keys().next().value!);
  }

  /** Settles once the work {@link track}ed for `repo` and the seed or update running are done. */
  async running(repo: RepoRef): Promise<void> {
    await this.#tracked.get(repo.id);
    await this.#running.get(repo.id)?.catch(() => {});
  }

  /**
   * Seeds `repo`'s mirror from the snapshot just published, unless it has one (a mirror that has
   * one is brought current by the fetches that need it). Never throws.
   */
  async seedFrom(repo: RepoRef, manifest: Manifest): Promise<void> {
    try {
      if (await this.host.exists(repo) || this.#tooOld(repo, manifest)) return;
      await this.#once(repo, async () => {
        if (await this.host.exists(repo)) return;
        this.#synced.delete(repo.id);
        await this.host.seed(repo, manifest);
        await this.#enforceCap(repo.id);
      });
    } catch {
      // The fetch that needs the mirror tries again.
    }
  }

  /**
   * The pack a snapshot build needs (`wants` minus `haves`, self-contained: see
   * {@link MirrorHost.pack}) from `repo`'s mirror, brought current first as for a fetch (seeded
   * from `manifest` when there is no mirror; joined to an update running); null when the mirror
   * cannot give it. A mirror that fails to pack what it holds is damaged: it is discarded (the
   * build asks the origin; the next fetch that needs the mirror seeds a new one). Never throws.
   */
  async packFor(
    repo: RepoRef,
    auth: OriginAuth,
    wants: readonly string[],
    haves: readonly string[],
    manifest: () => Promise<Manifest | null>,
  ): Promise<ReadableStream<Uint8Array> | null> {
    const ready = await this.ensure(repo, [...wants, ...haves], auth, manifest);
    if (!ready.ready) {
      this.#log?.log("info", "mirror.layer", {
        repo: repo.path,
        packed: false,
        reason: ready.reason,
      });
      return null;
    }
    let pack: ReadableStream<Uint8Array>;
    try {
      pack = await this.host.pack(repo, wants, haves);
    } catch (error) {
      this.#log?.log("warn", "mirror.discard", { repo: repo.path, reason: message(error) });
      await this.discard(repo.id).catch(() => {});
      return null;
    }
    this.layers++;
    let bytes = 0;
    const log = this.#log;
    return pack.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform: (chunk, out) => {
          bytes += chunk.byteLength;
          this.layerBytes += chunk.byteLength;
          this.onLayerBytes?.(repo.id, chunk.byteLength);
          out.enqueue(chunk);
        },
        flush: () => log?.log("info", "mirror.layer", { repo: repo.path, packed: true, bytes }),
      }),
    );
  }

  /**
   * Discards `repo`'s mirror, if it has one, because its objects must not be served any more
   * (the origin dropped some: a force push or deleted ref; the repository purged). A later fetch
   * or the snapshot just published seeds a new one. Throws when the mirror cannot be removed.
   */
  async forget(repo: RepoRef, notBefore?: number): Promise<boolean> {
    // No seed from a snapshot built before `notBefore` from here on (a fetch in the moment before
    // the coordinator names the new snapshot would seed from the old one, dropped objects and all).
    if (notBefore !== undefined) {
      this.#sealed.delete(repo.id);
      this.#sealed.set(repo.id, notBefore);
      if (this.#sealed.size > MAX_TRACKED) this.#sealed.delete(this.#sealed.keys().next().value!);
    }
    await this.#running.get(repo.id)?.catch(() => {});
    if (!await this.host.exists(repo)) return false;
    this.#log?.log("info", "mirror.discard", { repo: repo.path, reason: "objects dropped" });
    await this.discard(repo.id);
    return true;
  }

  /** Discards the mirror of repository `repoId` (a failed answer, or its repository evicted). */
  async discard(repoId: string): Promise<void> {
    await this.#running.get(repoId)?.catch(() => {});
    this.#synced.delete(repoId);
    this.discards++;
    this.#updatedAt.delete(repoId);
    await this.host.discard(repoId);
  }

  /** The mirrors' counters as metric families (`/_edge/metrics`). */
  families(): CollectedFamily[] {
    const counter = (name: string, help: string, value: number) =>
      oneSeries("counter", name, help, value);
    return [
      counter(
        "gitedge_mirror_answers_total",
        "Fetches answered by upload-pack on a git mirror.",
        this.served,
      ),
      counter(
        "gitedge_mirror_answer_bytes_total",
        "Bytes of those answers: bytes the origin did not send.",
        this.servedBytes,
      ),
      counter(
        "gitedge_mirror_updates_total",
        "Incremental fetches from the origin into mirrors.",
        this.updates,
      ),
      counter(
        "gitedge_mirror_update_failures_total",
        "Mirror updates that failed (the fetch went to the origin).",
        this.updateFailures,
      ),
      counter(
        "gitedge_mirror_layers_total",
        "Snapshot layers and first builds packed from a mirror instead of fetched from the origin.",
        this.layers,
      ),
      counter(
        "gitedge_mirror_layer_bytes_total",
        "Bytes of those packs: bytes the origin did not send to builds.",
        this.layerBytes,
      ),
      counter(
        "gitedge_mirror_discards_total",
        "Mirrors discarded (damaged, or their repository evicted).",
        this.discards,
      ),
    ];
  }

  /** Bytes all mirrors take on disk. */
  async diskBytes(): Promise<number> {
    return (await this.host.list()).reduce((n, m) => n + m.bytes, 0);
  }

  /** {@link families} and the mirrors' disk: how many there are and their bytes (gauges). */
  async collect(): Promise<CollectedFamily[]> {
    const all = await this.host.list().catch(() => []);
    const gauge = (name: string, help: string, value: number) =>
      oneSeries("gauge", name, help, value);
    return [
      ...this.families(),
      gauge("gitedge_mirrors", "Git mirrors on disk.", all.length),
      gauge(
        "gitedge_mirror_disk_bytes",
        "Bytes the git mirrors take on disk (their own cap: --mirror-max-bytes).",
        all.reduce((n, m) => n + m.bytes, 0),
      ),
    ];
  }

  /** `repo`'s mirror for the operator. */
  async status(repo: RepoRef): Promise<MirrorStatus> {
    const bytes = await this.host.size(repo);
    return {
      state: bytes === 0 ? "none" : this.#running.has(repo.id) ? "updating" : "ready",
      bytes,
      updatedAt: this.#updatedAt.get(repo.id) ??
        (bytes > 0 ? await this.host.refsChangedAt?.(repo).catch(() => null) ?? null : null),
    };
  }

  /** Whether `manifest` is older than the snapshot `repo`'s mirror was last forgotten for. */
  #tooOld(repo: RepoRef, manifest: Manifest): boolean {
    return manifest.builtAt < (this.#sealed.get(repo.id) ?? -Infinity);
  }

  /** Runs `work` unless one runs for `repo`, in which case it joins that one. */
  #once(repo: RepoRef, work: () => Promise<void>): Promise<void> {
    const running = this.#running.get(repo.id);
    if (running) return running;
    const run = work().finally(() => this.#running.delete(repo.id));
    this.#running.set(repo.id, run);
    return run;
  }

  #touch(id: string): void {
    this.#usedAt.delete(id);
    this.#usedAt.set(id, this.#now());
    if (this.#usedAt.size > MAX_TRACKED) this.#usedAt.delete(this.#usedAt.keys().next().value!);
  }

  /**
   * Discards the least recently used mirrors (not `keep`, none with a seed or update running)
   * while all of them take more than {@link maxBytes}.
   */
  async #enforceCap(keep: string): Promise<void> {
    if (this.maxBytes <= 0) return;
    const all = await this.host.list();
    let total = all.reduce((n, m) => n + m.bytes, 0);
    if (total <= this.maxBytes) return;
    const order = all
      .filter((m) => m.id !== keep && !this.#running.has(m.id))
      .sort((a, b) => (this.#usedAt.get(a.id) ?? 0) - (this.#usedAt.get(b.id) ?? 0));
    for (const m of order) {
      if (total <= this.maxBytes) break;
      this.discards++;
      this.evictions++;
      this.#updatedAt.delete(m.id);
      this.#usedAt.delete(m.id);
      this.#synced.delete(m.id);
      await this.host.discard(m.id);
      total -= m.bytes;
    }
  }

  #noteUpdate(repo: RepoRef): void {
    this.#updatedAt.delete(repo.id);
    this.#updatedAt.set(repo.id, this.#now());
    if (this.#updatedAt.size > MAX_TRACKED) {
      this.#updatedAt.delete(this.#updatedAt.keys().next().value!);
    }
  }
}

class NoSeedError extends Error {}

/** Whether two listings name the same refs with the same ids. */
function sameRefs(a: Record<string, string> | undefined, b: Record<string, string>): boolean {
  if (!a) return false;
  const keys = Object.keys(b);
  if (Object.keys(a).length !== keys.length) return false;
  return keys.every((k) => a[k] === b[k]);
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
