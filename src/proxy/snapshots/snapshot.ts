/**
 * Building snapshots: packs of a repository's objects in the store, plus a manifest naming them.
 *
 * A first build fetches everything the origin's branches and tags reach (`ofs-delta`, never
 * `thin-pack`) and splits it into at most `chunks` self-contained packs. A refresh fetches only
 * what the new tips add over the manifest's tips (`have <old tips>`), as a new layer. Layers are
 * compacted into one full build when they grow many. Publication order: packs, then the manifest,
 * so a crash leaves no manifest that names a missing pack. Unreferenced packs are deleted only
 * after a grace period, so URIs already handed out keep working.
 */
import type { Clock, OriginFetch } from "../core/deps.ts";
import {
  type LayerMeta,
  type Manifest,
  manifestPacks,
  type PackIndexRef,
  type SnapshotPack,
} from "../core/manifest.ts";
import type { OriginAuth, RepoRef } from "../core/repo.ts";
import { type PackStore, putBytes } from "../../storage/store.ts";
import { PackEntryTable } from "../../git/pack_entries.ts";
import { PktLineReader } from "../../git/pktline.ts";
import { serializeCommandRequest } from "../../git/command_request.ts";
import { emptyFetchArgs, serializeFetchArgs } from "../../git/fetch_request.ts";
import { readFetchResponse } from "../../git/fetch_response.ts";
import { packScanner, type PackSummary } from "../../git/pack_reader.ts";
import { planSplit, splitPack, type SplitPart } from "../../git/pack_split.ts";
import {
  listTips,
  OriginAnswerError,
  type OriginFormat,
  originFormat,
  orphanedSince,
  postUploadPack,
  readingOrigin,
} from "../origin/origin.ts";
import type { ObjectFormat } from "../../git/object_id.ts";
import type { PackSeeds } from "./pack_seeds.ts";
import {
  cachePrefix,
  indexKeyOf,
  manifestKey,
  packKey,
  repoPrefix,
  seedsPrefix,
  tmpPrefix,
} from "../core/store_layout.ts";
import { DEFAULT_SEGMENT_BYTES, segmentSink, segmentSource } from "../../storage/segments.ts";

export interface SnapshotBuilderDeps {
  store: PackStore;
  originFetch: OriginFetch;
  clock: Clock;
  /** Max packs per layer. */
  chunks: number;
  /** Layers beyond this trigger a full rebuild. */
  maxLayers?: number;
  /** Unreferenced packs younger than this are kept (ms). */
  graceMs?: number;
  /** Packs smaller than this are not split (bytes). */
  minSplitBytes?: number;
  /**
   * The origin's pack is kept in the store between build steps as objects of this many bytes
   * (the last one shorter), each written once and read back once per snapshot pack.
   */
  segmentBytes?: number;
  /**
   * When set, every pack of a published snapshot has its `.idx` beside it in the store, written
   * by this before the manifest names it (`--pack-indexes`; runtimes that cannot index leave it
   * unset).
   */
  buildIndex?: PackIndexBuilder;
  /**
   * Packs staged from clones' pass-through answers (pack_seeds.ts): a first build takes the one
   * of exactly its tips instead of fetching the pack again.
   */
  seeds?: PackSeeds;
  /**
   * A local copy of the repository that packs its objects (the Deno server's git mirror): a
   * build's fetch step takes its pack, when it gives one, instead of asking the origin for
   * objects the edge already received. Runtimes without one (the Worker) leave it unset.
   */
  localPacks?: LocalPacker;
}

/**
 * Packs a build's objects from a local copy of the repository (edge/deno/mirror.ts, through
 * src/proxy/mirror/mirrors.ts).
 */
export interface LocalPacker {
  /**
   * A self-contained pack (`ofs-delta`, never thin: every snapshot pack is indexed on its own) of
   * the objects `wants` reach minus those `haves` reach, once the local copy holds all of them
   * (brought current from the origin with `auth` if it must); null when it cannot give one (no
   * copy, not current, damaged): the build then asks the origin. The pack is checked on its way
   * into the store exactly as the origin's would be; a pack that fails those checks is dropped
   * and the build asks the origin.
   */
  pack(
    repo: RepoRef,
    auth: OriginAuth,
    wants: string[],
    haves: string[],
    objectFormat: ObjectFormat,
  ): Promise<ReadableStream<Uint8Array> | null>;
  /**
   * Drops the local copy of `repo`: called once a build that found objects the origin no longer
   * reaches (a force push, a deleted ref: a secret removed) has published `manifest`, so the copy
   * serves none of them from then on. It is made again from `manifest` or a later snapshot, never
   * an earlier one.
   */
  forget(repo: RepoRef, manifest: Manifest): Promise<void>;
}

/**
 * Writes the version-2 `.idx` of the stored pack `packKey` into the store under `indexKey`
 * (visible only once complete, like `PackStore.put`), or throws. Runtime-specific: the Deno server
 * runs `git index-pack` on the stored file (edge/deno/pack_index_builder.ts).
 */
export type PackIndexBuilder = (
  packKey: string,
  indexKey: string,
  objectFormat: ObjectFormat,
) => Promise<void>;

/**
 * Where an unfinished build stands: everything the next step needs, small and JSON-clean, so a
 * build can be carried across invocations (kept in Durable Object storage between alarms).
 * Credentials are never part of it: only the `fetch` step talks to the origin.
 */
export interface BuildState {
  /** The state's format version. */
  version: 1;
  /** Names this build's temporary objects and packs. */
  id: string;
  repo: RepoRef;
  /** The origin's object format and the capability lines requests carry for it. */
  origin: OriginFormat;
  tips: Record<string, string>;
  haves: string[];
  /** Layers kept from the previous snapshot (an incremental build adds one). */
  baseLayers: SnapshotPack[][];
  /** What the kept layers were built for, when the previous manifest says (bundles need it). */
  baseLayerMeta?: LayerMeta[];
  /** The step to run next. */
  next: "fetch" | "split" | "publish";
  /**
   * The previous snapshot held objects the origin no longer reaches: once this build has
   * published, the local copy of the repository ({@link LocalPacker.forget}) goes too.
   */
  orphaned?: true;
  /** The origin's pack, once fetched and scanned into the store. */
  pack?: StagedPack;
  /** Snapshot packs written so far, in part order. */
  written: SnapshotPack[];
}

/** The origin's pack in the store, between the steps of a build. */
export interface StagedPack {
  checksum: string;
  size: number;
  objects: number;
  /** Number of segment objects, and their size (all but the last). */
  segments: number;
  segmentBytes: number;
  dataEnd: number;
  largeSizes: [number, number][];
  /** The planned snapshot packs (the assignment of entries is in the store). */
  parts: SplitPart[];
  /**
   * Where the segments are when not among the build's temporary objects (a seeded pack's, see
   * pack_seeds.ts): `${segmentPrefix}segment-<i>`, deleted when the build ends.
   */
  segmentPrefix?: string;
}

/** The outcome of a step: the published manifest, or the state for the next step. */
export type BuildProgress = { done: Manifest } | { state: BuildState };

/** A build found its own intermediate state missing or inconsistent. */
export class SnapshotBuildError extends Error {
  override name = "SnapshotBuildError";
}

function packPrefix(repo: RepoRef): string {
  return packKey(repo.id, "");
}

export class SnapshotBuilder {
  readonly #deps: Required<Omit<SnapshotBuilderDeps, "buildIndex" | "seeds" | "localPacks">>;
  readonly #buildIndex: PackIndexBuilder | undefined;
  readonly #seeds: PackSeeds | undefined;
  readonly #localPacks: LocalPacker | undefined;

  constructor(deps: SnapshotBuilderDeps) {
    this.#buildIndex = deps.buildIndex;
    this.#seeds = deps.seeds;
    this.#localPacks = deps.localPacks;
    this.#deps = {
      maxLayers: 8,
      graceMs: 2 * 3600_000,
      minSplitBytes: 256 * 1024,
      segmentBytes: DEFAULT_SEGMENT_BYTES,
      ...deps,
    };
    const { segmentBytes } = this.#deps;
    if (!Number.isInteger(segmentBytes) || segmentBytes < 1) {
      throw new RangeError(`invalid segment size ${segmentBytes}`);
    }
  }

  /**
   * Builds or refreshes the snapshot of `repo` and publishes its manifest, running every step in
   * turn. Returns the manifest now in force (the previous one when the origin has not moved). A
   * failed build removes what it wrote.
   */
  async build(repo: RepoRef, auth: OriginAuth, previous: Manifest | null): Promise<Manifest> {
    let progress = await this.begin(repo, auth, previous);
    while ("state" in progress) {
      const state = progress.state;
      try {
        // In one invocation nothing limits a step: every snapshot pack is written in a single
        // pass over the segments (one pass per pack is for runtimes that bound each invocation).
        progress = state.next === "split"
          ? { state: await this.#splitStep(state, { allParts: true }) }
          : await this.step(state, auth);
      } catch (error) {
        await this.abandon(state).catch(() => {});
        throw error;
      }
    }
    return progress.done;
  }

  /**
   * Starts a build: lists the origin's tips and returns the state of the first step, or the
   * previous manifest when the tips have not moved. Leftovers of unfinished builds are removed
   * (builds of one repository never run concurrently).
   */
  async begin(repo: RepoRef, auth: OriginAuth, previous: Manifest | null): Promise<BuildProgress> {
    const { originFetch } = this.#deps;
    const origin = await originFormat(originFetch, repo, auth);
    const tips = await listTips(originFetch, repo, auth, origin);
    const objectFormat = origin.format;
    if (
      previous && (previous.objectFormat ?? "sha1") === objectFormat &&
      sameTips(previous.tips, tips)
    ) {
      await this.#seeds?.discard(repo.id);
      return { done: previous };
    }
    await this.#deleteUnder(tmpPrefix(repo.id));
    // An empty repository (no branches or tags) gets an empty snapshot: nothing to hand out.
    const wants = unique(Object.values(tips));
    // A refresh layers on the previous packs only while every object they hold is still
    // reachable at the origin: after a force push or a deleted ref (a secret removed), it is a
    // full build, so nothing the origin dropped is served again (docs/access.md); the stored
    // fetch answers go too (one for old wants would still hold those objects).
    const orphaned = previous !== null && wants.length > 0 &&
      await orphanedSince(originFetch, repo, auth, origin, Object.values(previous.tips), wants);
    if (orphaned) await this.#deleteUnder(cachePrefix(repo.id));
    const incremental = previous !== null && previous.layers.length < this.#deps.maxLayers &&
      (previous.objectFormat ?? "sha1") === objectFormat && wants.length > 0 && !orphaned;
    return {
      state: {
        version: 1,
        id: `${this.#deps.clock.now().toString(36)}-${crypto.randomUUID().slice(0, 8)}`,
        repo,
        origin,
        tips,
        haves: incremental ? unique(Object.values(previous.tips)) : [],
        baseLayers: incremental ? previous.layers : [],
        ...(incremental && previous.layerMeta ? { baseLayerMeta: previous.layerMeta } : {}),
        next: wants.length === 0 ? "publish" : "fetch",
        written: [],
        ...(orphaned ? { orphaned: true as const } : {}),
      },
    };
  }

  /**
   * Runs the next step of a build. Steps: `fetch` (the origin's pack, scanned on its way into
   * the store as segments, with its index and split plan), one `split` per snapshot pack (the
   * segments read back once, that pack's entries written), `publish` (the manifest; temporary
   * objects removed). Each step's memory is bounded by one segment, one upload part and the
   * compact index; a step that fails can run again from the same state.
   */
  async step(state: BuildState, auth: OriginAuth): Promise<BuildProgress> {
    switch (state.next) {
      case "fetch":
        return { state: await this.#fetchStep(state, auth) };
      case "split":
        return { state: await this.#splitStep(state) };
      case "publish":
        return { done: await this.#publish(state) };
    }
  }

  /** Removes everything an unfinished build wrote (its temporary objects and packs). */
  async abandon(state: BuildState): Promise<void> {
    await this.#deleteUnder(tmpPrefix(state.repo.id, state.id));
    if (state.pack?.segmentPrefix) await this.#deleteUnder(state.pack.segmentPrefix);
    await this.#deleteUnder(`${packPrefix(state.repo)}${state.id}-`);
  }

  /** `packs` with the store's version of each. */
  async #stamped(packs: SnapshotPack[]): Promise<SnapshotPack[]> {
    return await Promise.all(packs.map(async (pack) => {
      const info = await this.#deps.store.head(pack.key);
      if (!info || info.size !== pack.size) {
        throw new SnapshotBuildError(`pack ${pack.key} is not in the store as written`);
      }
      return info.version === undefined ? pack : { ...pack, version: info.version };
    }));
  }

  /**
   * `pack` with its index: the one it has when still in the store as recorded, else one built now
   * (one pack at a time: `git index-pack` uses every core).
   */
  async #withIndex(
    pack: SnapshotPack,
    format: ObjectFormat,
    buildIndex: PackIndexBuilder,
  ): Promise<SnapshotPack> {
    const { store } = this.#deps;
    if (pack.index) {
      const info = await store.head(pack.index.key);
      if (info && info.size === pack.index.size && info.version === pack.index.version) return pack;
    }
    const key = indexKeyOf(pack.key);
    await buildIndex(pack.key, key, format);
    const info = await store.head(key);
    // Version 2 with SHA-1: 8-byte header, 1 KiB fanout, 28 bytes per object, 2 trailers.
    if (!info || info.size < 1072 + pack.objects * 28) {
      throw new SnapshotBuildError(`the index of ${pack.key} is not in the store as written`);
    }
    const index: PackIndexRef = { key, size: info.size };
    if (info.version !== undefined) index.version = info.version;
    return { ...pack, index };
  }

  /**
   * Deletes packs of `repo` that `manifest` does not name and that are older than the grace
   * period, and incomplete writes as old (left by a crash during a build).
   */
  async collectGarbage(repo: RepoRef, manifest: Manifest): Promise<number> {
    const keep = new Set(
      manifestPacks(manifest).flatMap((p) => p.index ? [p.key, p.index.key] : [p.key]),
    );
    const cutoff = this.#deps.clock.now() - this.#deps.graceMs;
    const { store } = this.#deps;
    let deleted = await store.sweepIncomplete?.(repoPrefix(repo.id), cutoff) ?? 0;
    for (const obj of await store.list(packPrefix(repo))) {
      if (!keep.has(obj.key) && obj.modified < cutoff) {
        await store.delete(obj.key);
        deleted++;
      }
    }
    // Temporary objects of builds that never finished (the process died): builds are
    // single-flight, so at publication every other build's are orphans; and old seeds.
    for (
      const obj of [
        ...await store.list(tmpPrefix(repo.id)),
        ...await store.list(seedsPrefix(repo.id)),
      ]
    ) {
      if (obj.modified < cutoff) {
        await store.delete(obj.key);
        deleted++;
      }
    }
    return deleted;
  }

  async #deleteUnder(prefix: string): Promise<void> {
    for (const obj of await this.#deps.store.list(prefix)) await this.#deps.store.delete(obj.key);
  }

  /**
   * Fetches the tips minus the haves from the origin. The pack is checked (structure, sizes,
   * trailer hash) on its way into the store, where it is kept as segments; its compact index
   * and split plan go to the store too, so the following steps start from nothing in memory.
   */
  async #fetchStep(state: BuildState, auth: OriginAuth): Promise<BuildState> {
    const args = emptyFetchArgs();
    args.wants = unique(Object.values(state.tips));
    if (state.haves.length === 0 && this.#seeds) {
      // A clone of exactly these tips already brought the pack (checked as this step checks it).
      const seeded = await this.#seeds.take(state.repo.id, args.wants, state.origin.format);
      if (seeded) {
        return await this.#staged(state, seeded.summary, seeded.segments, {
          segmentBytes: seeded.segmentBytes,
          segmentPrefix: seeded.prefix,
        });
      }
    }
    // The edge's own copy of the repository, when it has one that holds (or, by its own update,
    // comes to hold) the new objects: the origin does not send them a second time.
    const local = await this.#fromLocal(state, auth, args.wants);
    if (local) return local;
    args.haves = state.haves;
    args.ofsDelta = true;
    args.noProgress = true;
    args.done = true;
    const body = serializeCommandRequest({
      command: "fetch",
      capabilities: state.origin.capabilities,
      args: serializeFetchArgs(args),
    });
    const { repo } = state;
    const res = await postUploadPack(this.#deps.originFetch, repo, auth, body);
    const reader = new PktLineReader(res.body!);
    const { store, segmentBytes } = this.#deps;
    const tmp = tmpPrefix(repo.id, state.id);
    const url = `${repo.originUrl}/git-upload-pack`;
    let received;
    try {
      // Malformed wire data or a bad pack is the origin's failure (502), not the edge's.
      received = await readingOrigin(url, async () => {
        let got = null;
        for await (const part of readFetchResponse(reader, {})) {
          if (part.section !== "packfile") continue;
          // The pack is checked (structure, sizes, trailer hash) on its way into the store.
          const scanner = packScanner({ objectFormat: state.origin.format });
          const sink = segmentSink(store, (i) => `${tmp}segment-${i}`, segmentBytes);
          await part.pack.pipeThrough(scanner.stream).pipeTo(sink.writable);
          got = { summary: await scanner.summary, segments: sink.count() };
        }
        return got;
      });
    } finally {
      // Whatever follows the pack (or the rest of a failed response) is not needed: release the
      // origin's response instead of leaving it unread.
      await reader.cancel().catch(() => {});
    }
    if (!received) throw new OriginAnswerError(url, "(fetch) holds no packfile");
    return await this.#staged(state, received.summary, received.segments, { segmentBytes });
  }

  /**
   * The fetch step's pack from {@link LocalPacker} (scanned into the store as the origin's is),
   * or null (nothing left behind) when there is none or it fails: the origin is asked then.
   */
  async #fromLocal(
    state: BuildState,
    auth: OriginAuth,
    wants: string[],
  ): Promise<BuildState | null> {
    if (!this.#localPacks) return null;
    const { store, segmentBytes } = this.#deps;
    const tmp = tmpPrefix(state.repo.id, state.id);
    const format = state.origin.format;
    try {
      const body = await this.#localPacks.pack(state.repo, auth, wants, state.haves, format);
      if (!body) return null;
      const scanner = packScanner({ objectFormat: format });
      const sink = segmentSink(store, (i) => `${tmp}segment-${i}`, segmentBytes);
      await body.pipeThrough(scanner.stream).pipeTo(sink.writable);
      return await this.#staged(state, await scanner.summary, sink.count(), { segmentBytes });
    } catch {
      await this.#deleteUnder(tmp).catch(() => {});
      return null;
    }
  }

  /** The state after the fetch step, with the pack's columns and split plan in the store. */
  async #staged(
    state: BuildState,
    summary: PackSummary,
    segments: number,
    where: { segmentBytes: number; segmentPrefix?: string },
  ): Promise<BuildState> {
    const { store } = this.#deps;
    const tmp = tmpPrefix(state.repo.id, state.id);
    const { segmentBytes, segmentPrefix } = where;
    if (summary.objects === 0) {
      if (segmentPrefix) await this.#deleteUnder(segmentPrefix);
      return { ...state, next: "publish" };
    }
    const parts = summary.size < this.#deps.minSplitBytes ? 1 : this.#deps.chunks;
    const plan = planSplit(summary.index, parts);
    const columns = summary.index.columns();
    // What a split step needs to locate entries and route them: their offsets and header lengths
    // (in `kinds`), and their parts. Sizes and delta bases are read again from the headers.
    await putBytes(store, `${tmp}offsets`, bytesOf(columns.offsets));
    await putBytes(store, `${tmp}kinds`, bytesOf(columns.kinds));
    await putBytes(store, `${tmp}assignment`, bytesOf(plan.assignment));
    return {
      ...state,
      next: "split",
      pack: {
        checksum: summary.checksum,
        size: summary.size,
        objects: summary.objects,
        segments,
        segmentBytes,
        dataEnd: columns.dataEnd,
        largeSizes: columns.largeSizes,
        parts: plan.parts,
        ...(segmentPrefix ? { segmentPrefix } : {}),
      },
    };
  }

  /**
   * Writes the next snapshot pack, or with `allParts` every pack not yet written: one pass over
   * the segments either way, copying those packs' entries.
   */
  async #splitStep(state: BuildState, opts: { allParts?: boolean } = {}): Promise<BuildState> {
    const pack = state.pack;
    if (!pack) throw new SnapshotBuildError(`build ${state.id} has no pack to split`);
    const first = state.written.length;
    // splitPack writes one part or all of them: all when none is written yet.
    const whole = opts.allParts === true && first === 0;
    const parts = whole ? pack.parts.map((_, i) => i) : [first];
    const { store } = this.#deps;
    const tmp = tmpPrefix(state.repo.id, state.id);
    const load = async (name: string, into: Uint8Array) => {
      if (!await loadColumn(store, `${tmp}${name}`, into.byteLength, (c, at) => into.set(c, at))) {
        throw new SnapshotBuildError(`build ${state.id}: its ${name} column is missing or damaged`);
      }
    };
    // Loaded into arrays of their final size, chunk by chunk (no second copy while reading);
    // offsets as 32-bit numbers when the pack is under 4 GiB.
    const n = pack.objects;
    let offsets: Float64Array | Uint32Array;
    if (pack.size <= 0xffffffff) {
      offsets = new Uint32Array(n);
      const narrow = narrowing(offsets);
      const loaded = await loadColumn(store, `${tmp}offsets`, n * 8, (c) => narrow.write(c));
      if (!loaded || narrow.finish() !== n) {
        throw new SnapshotBuildError(`build ${state.id}: its offsets column is missing or damaged`);
      }
    } else {
      offsets = new Float64Array(n);
      await load("offsets", bytesOf(offsets));
    }
    const kinds = new Uint8Array(n);
    await load("kinds", kinds);
    const index = PackEntryTable.fromColumns({ offsets, kinds, dataEnd: pack.dataEnd });
    const assignment = new Uint32Array(n);
    await load("assignment", bytesOf(assignment));
    const plan = { assignment, parts: pack.parts, families: pack.parts.length };
    const keys = parts.map((p) => `${packPrefix(state.repo)}${state.id}-${p}.pack`);
    const segments = pack.segmentPrefix ?? tmp;
    const source = segmentSource(store, (i) => `${segments}segment-${i}`, pack.segments);
    const pipes = keys.map(() => new TransformStream<Uint8Array, Uint8Array>());
    const puts = keys.map((key, i) => {
      const put = store.put(key, pipes[i].readable);
      // A put that fails first (perhaps before reading anything) must not leave the split waiting
      // to write: cancelling its end fails the split's next write. Its error is the one reported.
      put.catch((error) => pipes[i].readable.cancel(error).catch(() => {}));
      return put;
    });
    let written;
    try {
      const summary = { ...pack, index, objectFormat: state.origin.format };
      written = await splitPack(
        source,
        summary,
        plan,
        pipes.map((p) => p.writable),
        whole ? {} : { only: first },
      );
    } catch (error) {
      // Sinks splitPack never took (it refused the plan) are ended here, so no put waits on them.
      await Promise.all(pipes.map((p) => p.writable.abort(error).catch(() => {})));
      const failedPut = (await Promise.allSettled(puts)).find((r) => r.status === "rejected");
      throw failedPut ? (failedPut as PromiseRejectedResult).reason ?? error : error;
    }
    const stored = await Promise.all(puts);
    // A pack is counted only once the store holds every byte the split wrote.
    stored.forEach(({ size }, i) => {
      if (size !== written[i].size) {
        throw new SnapshotBuildError(
          `build ${state.id}: ${keys[i]} stored ${size} of ${written[i].size} bytes`,
        );
      }
    });
    const packs = [
      ...state.written,
      ...written.map((w, i) => ({
        hash: w.hash,
        key: keys[i],
        size: w.size,
        objects: w.objects,
      })),
    ];
    return {
      ...state,
      written: packs,
      next: packs.length < pack.parts.length ? "split" : "publish",
    };
  }

  /** Publishes the manifest (packs first, manifest last), then removes what is no longer needed. */
  async #publish(state: BuildState): Promise<Manifest> {
    let layers = [...state.baseLayers];
    // Each pack was hashed on its way into the store (scanned, then written by the split); its
    // store version now lets every later fetch notice, cheaply, that it was rewritten since.
    if (state.written.length > 0) layers.push(await this.#stamped(state.written));
    // With indexes on, every pack gets its index before the manifest names it (packs of older
    // layers built without indexes too).
    if (this.#buildIndex) {
      const format = state.origin.format;
      const indexed: SnapshotPack[][] = [];
      for (const layer of layers) {
        const packs: SnapshotPack[] = [];
        for (const pack of layer) packs.push(await this.#withIndex(pack, format, this.#buildIndex));
        indexed.push(packs);
      }
      layers = indexed;
    } else {
      // Indexes turned off: the manifest stops naming them, and they go with unreferenced packs.
      layers = layers.map((layer) => layer.map(({ index: _, ...pack }) => pack));
    }
    const builtAt = this.#deps.clock.now();
    const layerMeta = layerMetaOf(state, builtAt);
    const manifest: Manifest = {
      version: 1,
      originUrl: state.repo.originUrl,
      tips: state.tips,
      layers,
      builtAt,
      ...(state.origin.format === "sha1" ? {} : { objectFormat: state.origin.format }),
      ...(layerMeta ? { layerMeta } : {}),
    };
    await putBytes(
      this.#deps.store,
      manifestKey(state.repo.id),
      new TextEncoder().encode(JSON.stringify(manifest)),
    );
    await this.#deleteUnder(tmpPrefix(state.repo.id, state.id));
    if (state.pack?.segmentPrefix) await this.#deleteUnder(state.pack.segmentPrefix);
    // A seed no build took (it came while this one ran) is of no use now.
    await this.#seeds?.discard(state.repo.id);
    await this.collectGarbage(state.repo, manifest);
    // The local copy still holds what the origin dropped: it goes (and is made again from this
    // snapshot), so no fetch is answered with those objects from here on.
    if (state.orphaned) await this.#localPacks?.forget(state.repo, manifest);
    return manifest;
  }
}

/**
 * What each layer of the manifest `state` publishes was built for: the kept layers' (when known
 * for every one of them) and the new layer's, or undefined when a kept layer's is unknown.
 */
function layerMetaOf(state: BuildState, builtAt: number): LayerMeta[] | undefined {
  const base = state.baseLayers.length === 0 ? [] : state.baseLayerMeta;
  if (!base || base.length !== state.baseLayers.length) return undefined;
  return state.written.length > 0 ? [...base, { tips: state.tips, builtAt }] : base;
}

/**
 * Reads the stored object `key` chunk by chunk, handing each chunk to `write` with its offset;
 * returns false when it is missing or not exactly `byteLength` bytes long.
 */
async function loadColumn(
  store: PackStore,
  key: string,
  byteLength: number,
  write: (chunk: Uint8Array, at: number) => void,
): Promise<boolean> {
  const object = await store.get(key);
  if (!object) return false;
  const reader = object.body.getReader();
  try {
    if (object.size !== byteLength) return false;
    let at = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return at === byteLength;
      if (at + value.byteLength > byteLength) return false;
      write(value, at);
      at += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/**
 * A writer for {@link loadColumn} that turns stored 64-bit floats (native byte order, as
 * `bytesOf` wrote them) into `into`'s 32-bit numbers as they arrive, through a 64 KiB staging
 * buffer: the 64-bit column is never held whole. `into` must be filled exactly.
 */
function narrowing(into: Uint32Array) {
  const staging = new Float64Array(8192);
  const stagingBytes = new Uint8Array(staging.buffer);
  let staged = 0;
  let converted = 0;
  const convert = (values: number) => {
    for (let v = 0; v < values; v++) into[converted++] = staging[v];
  };
  return {
    write(chunk: Uint8Array): void {
      for (let i = 0; i < chunk.byteLength;) {
        const take = Math.min(stagingBytes.byteLength - staged, chunk.byteLength - i);
        stagingBytes.set(chunk.subarray(i, i + take), staged);
        staged += take;
        i += take;
        if (staged === stagingBytes.byteLength) {
          convert(staging.length);
          staged = 0;
        }
      }
    },
    /** Converts what is staged; the count of values converted in all. */
    finish(): number {
      convert(staged / 8);
      staged = 0;
      return converted;
    },
  };
}

/** The bytes of a typed array (a view, not a copy). */
function bytesOf(array: Float64Array | Uint8Array | Uint32Array | Int32Array): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

function sameTips(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

function unique(xs: string[]): string[] {
  return [...new Set(xs)];
}
