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
import type { Clock, Manifest, OriginAuth, OriginFetch, RepoRef, SnapshotPack } from "./deps.ts";
import type { PackStore } from "../storage/store.ts";
import { getBytes, putBytes } from "../storage/store.ts";
import { PktLineReader } from "../git/pktline.ts";
import {
  capabilityValue,
  emptyFetchArgs,
  parseLsRefsLine,
  readCapabilityAdvertisement,
  readFetchResponse,
  serializeCommandRequest,
  serializeFetchArgs,
} from "../git/protocol.ts";
import { packScanner } from "../git/pack_reader.ts";
import { planSplit, splitPack } from "../git/pack_split.ts";
import { getUploadPackAdvertisement, postUploadPack } from "./origin.ts";
import type { ObjectFormat } from "../git/pack.ts";

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
}

export class SnapshotBuildError extends Error {
  override name = "SnapshotBuildError";
}

const AGENT = "agent=gitedge/0.1";

export function manifestKey(repo: RepoRef): string {
  return `repos/${repo.id}/manifest.json`;
}

function packPrefix(repo: RepoRef): string {
  return packKey(repo.id, "");
}

/** Where pack `file` of the repository with id `repoId` lives in the store. */
export function packKey(repoId: string, file: string): string {
  return `repos/${repoId}/packs/${file}`;
}

/** Every pack of a manifest, oldest layer first. */
export function manifestPacks(m: Manifest): SnapshotPack[] {
  return m.layers.flat();
}

export async function readManifest(store: PackStore, repo: RepoRef): Promise<Manifest | null> {
  const bytes = await getBytes(store, manifestKey(repo));
  if (!bytes) return null;
  const m = JSON.parse(new TextDecoder().decode(bytes)) as Manifest;
  if (m.version !== 1 || !Array.isArray(m.layers)) {
    throw new SnapshotBuildError(`unreadable manifest for ${repo.originUrl}`);
  }
  return m;
}

export class SnapshotBuilder {
  readonly #deps: Required<SnapshotBuilderDeps>;

  constructor(deps: SnapshotBuilderDeps) {
    this.#deps = {
      maxLayers: 8,
      graceMs: 2 * 3600_000,
      minSplitBytes: 256 * 1024,
      ...deps,
    };
  }

  /**
   * Builds or refreshes the snapshot of `repo` and publishes its manifest. Returns the manifest
   * now in force (the previous one when the origin has not moved).
   */
  async build(repo: RepoRef, auth: OriginAuth, previous: Manifest | null): Promise<Manifest> {
    const origin = await this.#originFormat(repo, auth);
    const tips = await this.#listTips(repo, auth, origin);
    const objectFormat = origin.format;
    if (
      previous && (previous.objectFormat ?? "sha1") === objectFormat &&
      sameTips(previous.tips, tips)
    ) {
      return previous;
    }

    // An empty repository (no branches or tags) gets an empty snapshot: nothing to hand out.
    const incremental = previous !== null && previous.layers.length < this.#deps.maxLayers &&
      (previous.objectFormat ?? "sha1") === objectFormat;
    const haves = incremental ? unique(Object.values(previous.tips)) : [];
    const buildId = `${this.#deps.clock.now().toString(36)}-${crypto.randomUUID().slice(0, 8)}`;
    const wants = unique(Object.values(tips));
    const layer = wants.length === 0
      ? []
      : await this.#fetchLayer(repo, auth, wants, haves, buildId, origin);
    const layers = incremental && wants.length > 0 ? [...previous.layers] : [];
    if (layer.length > 0) layers.push(layer);
    const manifest: Manifest = {
      version: 1,
      originUrl: repo.originUrl,
      tips,
      layers,
      builtAt: this.#deps.clock.now(),
      ...(objectFormat === "sha1" ? {} : { objectFormat }),
    };
    await putBytes(
      this.#deps.store,
      manifestKey(repo),
      new TextEncoder().encode(JSON.stringify(manifest)),
    );
    await this.collectGarbage(repo, manifest);
    return manifest;
  }

  /** Deletes packs of `repo` that `manifest` does not name and that are older than the grace period. */
  async collectGarbage(repo: RepoRef, manifest: Manifest): Promise<number> {
    const keep = new Set(manifestPacks(manifest).map((p) => p.key));
    const cutoff = this.#deps.clock.now() - this.#deps.graceMs;
    let deleted = 0;
    for (const obj of await this.#deps.store.list(packPrefix(repo))) {
      if (!keep.has(obj.key) && obj.modified < cutoff) {
        await this.#deps.store.delete(obj.key);
        deleted++;
      }
    }
    return deleted;
  }

  /**
   * The origin's object format, from its v2 advertisement, and the capability lines requests
   * must carry for it (`object-format=` only where advertised: older servers refuse it).
   */
  async #originFormat(repo: RepoRef, auth: OriginAuth): Promise<OriginFormat> {
    const res = await getUploadPackAdvertisement(this.#deps.originFetch, repo, auth);
    const reader = new PktLineReader(res.body!);
    try {
      const adv = await readCapabilityAdvertisement(reader);
      const value = capabilityValue(adv, "object-format");
      if (value !== undefined && value !== "sha1" && value !== "sha256") {
        throw new SnapshotBuildError(`${repo.originUrl} uses object format ${value}`);
      }
      const format: ObjectFormat = value === "sha256" ? "sha256" : "sha1";
      return { format, capabilities: value ? [AGENT, `object-format=${value}`] : [AGENT] };
    } finally {
      await reader.cancel().catch(() => {});
    }
  }

  async #listTips(
    repo: RepoRef,
    auth: OriginAuth,
    origin: OriginFormat,
  ): Promise<Record<string, string>> {
    const body = serializeCommandRequest({
      command: "ls-refs",
      capabilities: origin.capabilities,
      args: ["peel", "ref-prefix refs/heads/", "ref-prefix refs/tags/"],
    });
    const res = await postUploadPack(this.#deps.originFetch, repo, auth, body);
    const reader = new PktLineReader(res.body!);
    const tips: Record<string, string> = {};
    for (;;) {
      const pkt = await reader.read();
      if (pkt === null || pkt.type === "flush" || pkt.type === "response-end") break;
      if (pkt.type !== "data") continue;
      const line = parseLsRefsLine(new TextDecoder().decode(pkt.data).replace(/\n$/, ""));
      if (line.oid && line.oid.length === (origin.format === "sha256" ? 64 : 40)) {
        tips[line.name] = line.oid;
      }
    }
    await reader.cancel().catch(() => {});
    return tips;
  }

  /** Fetches `wants` minus `haves` from the origin into the store as ≤ `chunks` packs. */
  async #fetchLayer(
    repo: RepoRef,
    auth: OriginAuth,
    wants: string[],
    haves: string[],
    buildId: string,
    origin: OriginFormat,
  ): Promise<SnapshotPack[]> {
    const args = emptyFetchArgs();
    args.wants = wants;
    args.haves = haves;
    args.ofsDelta = true;
    args.noProgress = true;
    args.done = true;
    const body = serializeCommandRequest({
      command: "fetch",
      capabilities: origin.capabilities,
      args: serializeFetchArgs(args),
    });
    const res = await postUploadPack(this.#deps.originFetch, repo, auth, body);
    const reader = new PktLineReader(res.body!);
    const { store } = this.#deps;
    const fullKey = `${packPrefix(repo)}${buildId}-full.pack`;
    let summary;
    try {
      for await (const part of readFetchResponse(reader, {})) {
        if (part.section !== "packfile") continue;
        // The pack is checked (structure, sizes, trailer hash) on its way into the store.
        const scanner = packScanner({ objectFormat: origin.format });
        await store.put(fullKey, part.pack.pipeThrough(scanner.stream));
        summary = await scanner.summary;
      }
    } finally {
      // Whatever follows the pack (or the rest of a failed response) is not needed: release the
      // origin's response instead of leaving it unread.
      await reader.cancel().catch(() => {});
    }
    if (!summary) throw new SnapshotBuildError(`origin sent no packfile for ${repo.originUrl}`);
    if (summary.objects === 0) {
      await store.delete(fullKey);
      return [];
    }
    const parts = summary.size < this.#deps.minSplitBytes ? 1 : this.#deps.chunks;
    const plan = planSplit(summary.index, parts);
    if (plan.parts.length <= 1) {
      return [{
        hash: summary.checksum,
        key: fullKey,
        size: summary.size,
        objects: summary.objects,
      }];
    }
    const source = await store.get(fullKey);
    if (!source) throw new SnapshotBuildError(`pack ${fullKey} vanished during the build`);
    const keys = plan.parts.map((_, i) => `${packPrefix(repo)}${buildId}-${i}.pack`);
    const pipes = keys.map(() => new TransformStream<Uint8Array, Uint8Array>());
    const puts = keys.map((key, i) => store.put(key, pipes[i].readable));
    try {
      const written = await splitPack(source.body, summary, plan, pipes.map((p) => p.writable));
      await Promise.all(puts);
      return written.map((w, i) => ({
        hash: w.hash,
        key: keys[i],
        size: w.size,
        objects: w.objects,
      }));
    } catch (err) {
      await Promise.allSettled(puts);
      await Promise.all(keys.map((k) => store.delete(k)));
      throw err;
    } finally {
      await store.delete(fullKey);
    }
  }
}

/** The origin's object format and the capability lines that say so. */
interface OriginFormat {
  format: ObjectFormat;
  capabilities: string[];
}

function sameTips(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

function unique(xs: string[]): string[] {
  return [...new Set(xs)];
}
