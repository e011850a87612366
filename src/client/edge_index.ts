/**
 * The opt-in trusted-index path (`gitedge clone --trust-edge-index`): for a packfile URI whose
 * edge keeps the pack's `.idx` (`gitedge serve --pack-indexes on`), the client downloads pack and
 * index and checks checksums and the index's structure instead of running `git index-pack`.
 *
 * What is checked: the pack's SHA-1 over everything but its trailer equals the trailer and the
 * announced hash; the index is version 2 with a monotone fanout, as many objects as the pack's
 * header, names strictly sorted and matching the fanout, every offset inside the pack's entries
 * and distinct (the smallest right after the header), the pack's checksum, and its own trailing
 * checksum. What is not: that the object at an offset hashes to its name. A lying edge can make an
 * object named X not hash to X; `git fsck` after the clone finds it. That is why it is opt-in on
 * both sides and meant for fleets that run their own edge; the default stays `index-pack`.
 *
 * The index is asked for first; a 404, any other refusal or a failed transfer falls back to the
 * usual `index-pack` download for that pack (spooled or streamed). Once both came, any mismatch
 * is an {@link EdgeIndexError} naming the URI, and nothing stays staged.
 */
import { createHash } from "node:crypto";
import { concat } from "../git/pktline.ts";
import type { PackfileUri } from "../git/packfile_uris.ts";
import { EdgeIndexError, VerificationError } from "./errors.ts";
import { IdleWatchdog } from "./idle_watchdog.ts";
import { removeStaged } from "./index_pack.ts";
import {
  downloadPackfile,
  type DownloadSettings,
  type PackfileResult,
} from "./packfile_download.ts";
import { toHex } from "../git/object_id.ts";

export { EdgeIndexError } from "./errors.ts";

/**
 * The URL of the index of the pack at `packUri`: the path's `.pack` becomes `.idx`, query kept.
 *
 * @example Where the edge serves a pack's index
 * ```ts
 * indexUrlOf("https://edge.example/_edge/packs/r/p.pack?exp=1&sig=s");
 * // "https://edge.example/_edge/packs/r/p.idx?exp=1&sig=s"
 * indexUrlOf("https://edge.example/r/info/refs"); // null: not a pack
 * ```
 */
export function indexUrlOf(packUri: string): string | null {
  const url = URL.parse(packUri);
  if (!url || !url.pathname.endsWith(".pack")) return null;
  url.pathname = `${url.pathname.slice(0, -".pack".length)}.idx`;
  return url.href;
}

/**
 * Downloads one pack with the edge's index when the edge has one, else (or when a transfer fails
 * before both are in) with {@link downloadPackfile}. The result says which (`edgeIndex`).
 */
export async function downloadWithEdgeIndex(
  entry: PackfileUri,
  settings: DownloadSettings,
  signal: AbortSignal,
): Promise<PackfileResult> {
  const trusted = await tryEdgeIndex(entry, settings, signal);
  return trusted ?? await downloadPackfile(entry, settings, signal);
}

/** Thrown inside {@link tryEdgeIndex} to fall back to index-pack. */
class Fallback extends Error {}

async function tryEdgeIndex(
  entry: PackfileUri,
  settings: DownloadSettings,
  signal: AbortSignal,
): Promise<PackfileResult | null> {
  const idxUrl = indexUrlOf(entry.uri);
  if (idxUrl === null) return null;
  const hash = entry.hash.toLowerCase();
  const hashBytes = hash.length / 2;
  const started = performance.now();
  const packDir = `${settings.gitDir}/objects/pack`;
  const stem = `${packDir}/tmp_gitedge_${crypto.randomUUID()}`;
  const staged = { pack: `${stem}.pack`, idx: `${stem}.idx` };
  using watchdog = new IdleWatchdog(entry.uri, settings.timeoutMs, signal);
  // Ends both transfers when either fails.
  const local = new AbortController();
  const requestSignal = AbortSignal.any([watchdog.signal, local.signal]);
  const get = async (url: string) => {
    const headers = new Headers(settings.headersFor(entry.uri));
    headers.set("accept-encoding", "identity");
    try {
      const res = await settings.fetch(url, { headers, signal: requestSignal });
      watchdog.touch();
      if (res.status === 200) return res;
      await res.body?.cancel().catch(() => {});
    } catch {
      if (signal.aborted) throw signal.reason;
    }
    throw new Fallback();
  };
  let idxRes: Response | null = null;
  let installed = false;
  try {
    idxRes = await get(idxUrl);
    const packRes = await get(entry.uri);
    const packSize = Number(packRes.headers.get("content-length") ?? NaN);
    const idxSize = Number(idxRes.headers.get("content-length") ?? NaN);
    if (!Number.isSafeInteger(packSize) || !Number.isSafeInteger(idxSize)) {
      await packRes.body?.cancel().catch(() => {});
      throw new Fallback();
    }
    // Bounded by the pack before a byte of the index is read: an entry takes at least 2 bytes.
    const most = indexSize(Math.max(0, Math.floor((packSize - 12 - hashBytes) / 2)), {
      hashBytes,
      large: packSize > 0x7fffffff,
    });
    if (idxSize > most) {
      await packRes.body?.cancel().catch(() => {});
      throw new EdgeIndexError(entry.uri, `${idxSize} bytes of index for ${packSize} of pack`);
    }
    settings.onProgress({ type: "start", hash, bytes: 0, total: packSize });
    const both = [
      readExactly(idxRes.body!, idxSize, watchdog),
      stagePack(packRes.body!, staged.pack, packSize, hash, settings, watchdog),
    ] as const;
    // Whichever fails, the other stops too; both settle before anything is removed.
    both.forEach((p) => p.catch(() => local.abort()));
    const [idxDone, packDone] = await Promise.allSettled(both);
    if (idxDone.status === "rejected" || packDone.status === "rejected") {
      if (signal.aborted) throw signal.reason;
      // A transfer that failed before both were in: index-pack's download, with its retries.
      throw new Fallback();
    }
    const idx = idxDone.value;
    const pack = packDone.value;
    // The pack itself must be the announced one, with a trailer that is its own checksum.
    if (pack.trailer !== pack.computed || pack.computed !== hash) {
      throw new VerificationError(entry.uri, hash, pack.computed);
    }
    const problem = checkIndex(idx, { ...pack, size: packSize, hashBytes });
    if (problem !== null) throw new EdgeIndexError(entry.uri, problem);
    await writeIndex(staged.idx, idx, await settings.fsyncPacks());
    // Pack first, index last (as git does): a reader never sees an index without its pack.
    const packPath = `${packDir}/pack-${hash}.pack`;
    await Deno.rename(staged.pack, packPath);
    await Deno.rename(staged.idx, `${packDir}/pack-${hash}.idx`);
    installed = true;
    const seconds = (performance.now() - started) / 1000;
    settings.onProgress({ type: "done", hash, bytes: packSize, seconds });
    return { ...entry, bytes: packSize, seconds, retries: 0, packPath, edgeIndex: true };
  } catch (error) {
    if (error instanceof Fallback) return null;
    throw error;
  } finally {
    await idxRes?.body?.cancel().catch(() => {});
    if (!installed) await removeStaged(staged);
  }
}

/** Writes the checked index, flushed to disk when packs are (git flushes pack metadata too). */
async function writeIndex(path: string, idx: Uint8Array, flush: boolean): Promise<void> {
  using file = await Deno.open(path, { write: true, createNew: true, mode: 0o444 });
  let at = 0;
  while (at < idx.byteLength) at += await file.write(idx.subarray(at));
  if (flush) await file.syncData();
}

/** The whole body, which must be `size` bytes. */
async function readExactly(
  body: ReadableStream<Uint8Array>,
  size: number,
  watchdog: IdleWatchdog,
): Promise<Uint8Array> {
  const out = new Uint8Array(size);
  let at = 0;
  for await (const chunk of body) {
    watchdog.touch();
    if (at + chunk.byteLength > size) throw new Fallback();
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  if (at !== size) throw new Fallback();
  return out;
}

/** What streaming the pack to its staged file found. */
interface StagedPack {
  /** The pack header's object count. */
  objects: number;
  /** SHA-1 of everything before the trailer, and the trailer (hex). */
  computed: string;
  trailer: string;
}

/** Streams the pack to `path` while hashing it; `size` bytes (from `Content-Length`). */
async function stagePack(
  body: ReadableStream<Uint8Array>,
  path: string,
  size: number,
  hash: string,
  settings: DownloadSettings,
  watchdog: IdleWatchdog,
): Promise<StagedPack> {
  const hashBytes = hash.length / 2;
  const hasher = createHash(hashBytes === 32 ? "sha256" : "sha1");
  const file = await Deno.open(path, { write: true, createNew: true });
  const writer = file.writable.getWriter();
  // The last `hashBytes` seen are held back: they may be the trailer.
  let tail = new Uint8Array(0);
  const head = new Uint8Array(12);
  let received = 0;
  try {
    for await (const chunk of body) {
      watchdog.touch();
      if (received + chunk.byteLength > size) throw new Fallback();
      if (received < 12) head.set(chunk.subarray(0, 12 - received), received);
      received += chunk.byteLength;
      settings.arrivals.total += chunk.byteLength;
      if (chunk.byteLength >= hashBytes) {
        hasher.update(tail);
        hasher.update(chunk.subarray(0, chunk.byteLength - hashBytes));
        tail = chunk.slice(chunk.byteLength - hashBytes);
      } else {
        const joined = concat([tail, chunk]);
        const cut = Math.max(0, joined.byteLength - hashBytes);
        hasher.update(joined.subarray(0, cut));
        tail = joined.slice(cut);
      }
      await writer.write(chunk);
      watchdog.touch();
      settings.onProgress({ type: "progress", hash, bytes: received, total: size });
    }
    // As durable as index-pack --stdin would make it (core.fsync; see fsync_config.ts).
    if (await settings.fsyncPacks()) await file.syncData();
    await writer.close();
  } catch (error) {
    await writer.abort(error).catch(() => {});
    throw error;
  }
  if (received !== size || size < 12 + hashBytes) throw new Fallback();
  const view = new DataView(head.buffer);
  const magic = new TextDecoder().decode(head.subarray(0, 4));
  const version = view.getUint32(4);
  if (magic !== "PACK" || (version !== 2 && version !== 3)) {
    return { objects: -1, computed: "(not a pack)", trailer: "" };
  }
  return { objects: view.getUint32(8), computed: hasher.digest("hex"), trailer: toHex(tail) };
}

/** The size of a version-2 index of `objects` objects (with a large offset for each if `large`). */
function indexSize(objects: number, opts: { hashBytes: number; large: boolean }): number {
  return 8 + 1024 + objects * (opts.hashBytes + 8) + (opts.large ? objects * 8 : 0) +
    2 * opts.hashBytes;
}

/**
 * The first thing wrong with `idx` as the version-2 index of a pack of `size` bytes with
 * `objects` objects and checksum `computed`, or null.
 */
export function checkIndex(
  idx: Uint8Array,
  pack: { objects: number; computed: string; size: number; hashBytes: number },
): string | null {
  const { hashBytes: h } = pack;
  const view = new DataView(idx.buffer, idx.byteOffset, idx.byteLength);
  if (idx.byteLength < indexSize(0, { hashBytes: h, large: false })) return "it is truncated";
  if (view.getUint32(0) !== 0xff744f63 || view.getUint32(4) !== 2) return "it is not version 2";
  let previous = 0;
  for (let b = 0; b < 256; b++) {
    const count = view.getUint32(8 + 4 * b);
    if (count < previous) return `its fanout decreases at ${b}`;
    previous = count;
  }
  const n = previous;
  if (n !== pack.objects) return `it lists ${n} objects, the pack has ${pack.objects}`;
  const names = 8 + 1024;
  const offsets = names + n * (h + 4);
  const large = offsets + n * 4;
  const end = idx.byteLength - 2 * h;
  if (end < large || (end - large) % 8 !== 0) return `its size ${idx.byteLength} does not fit`;
  const largeCount = (end - large) / 8;
  // Names strictly ascending, each in its fanout bucket.
  let bucket = 0;
  for (let i = 0; i < n; i++) {
    const at = names + i * h;
    while (view.getUint32(8 + 4 * bucket) <= i) bucket++;
    if (idx[at] !== bucket) return `object ${i} is outside its fanout bucket`;
    if (i > 0 && compare(idx, at - h, at, h) >= 0) return `its names are not sorted at ${i}`;
  }
  // Every offset inside the pack's entries, all distinct, the first entry right after the header.
  const positions = new Float64Array(n);
  const dataEnd = pack.size - h;
  for (let i = 0; i < n; i++) {
    let offset = view.getUint32(offsets + 4 * i);
    if (offset & 0x80000000) {
      const j = offset & 0x7fffffff;
      if (j >= largeCount) return `object ${i}'s large offset is missing`;
      offset = view.getUint32(large + 8 * j) * 2 ** 32 + view.getUint32(large + 8 * j + 4);
    }
    if (offset < 12 || offset >= dataEnd) {
      return `object ${i}'s offset ${offset} is outside the pack`;
    }
    positions[i] = offset;
  }
  positions.sort();
  if (n > 0 && positions[0] !== 12) return "no object starts right after the pack's header";
  for (let i = 1; i < n; i++) {
    if (positions[i] === positions[i - 1]) return `two objects at offset ${positions[i]}`;
  }
  if (toHex(idx.subarray(end, end + h)) !== pack.computed) {
    return "its pack checksum is not the pack's";
  }
  const own = createHash(h === 32 ? "sha256" : "sha1").update(idx.subarray(0, end + h)).digest(
    "hex",
  );
  if (toHex(idx.subarray(end + h)) !== own) return "its own checksum does not match";
  return null;
}

function compare(bytes: Uint8Array, a: number, b: number, length: number): number {
  for (let i = 0; i < length; i++) {
    const d = bytes[a + i] - bytes[b + i];
    if (d !== 0) return d;
  }
  return 0;
}
