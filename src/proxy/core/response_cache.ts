/**
 * The response cache: origin answers to fetches (shallow, partial, single-branch and single-commit
 * clones, full clones without packfile URIs, and incremental fetches), stored byte for byte in the
 * pack store, so a CI fleet cloning one commit, or fetching into the same clone of yesterday,
 * makes the origin compute that pack once.
 *
 * Keys: the repository, the normalised request (wants and haves as sets, `done`, every argument
 * that shapes the pack) and, when the client asked for `include-tag` and sent no haves
 * ({@link keyedByTags}), a digest of the origin's
 * tags as the edge just read them with the client's credentials (a tag added or moved changes
 * which tag objects belong in the answer). Wants and haves are object ids, so a moved branch makes
 * clients ask for a new key: an answer is never stale. An answer to `have` lines is the pack of
 * what the wants reach less what the haves reach (after the origin's `ACK`s and `ready` when the
 * request has no `done`): the same for every client that sends those haves, and only for them.
 * A negotiation round the origin answers without a pack (not `ready` yet) is never stored (see
 * below). Requests whose answer depends on ref names (`want-ref`, `deepen-not`) or on a shallow
 * client's boundary (`shallow`) are not cached, nor `wait-for-done` rounds.
 *
 * Progress is not part of an answer: fills ask the origin with `no-progress`.
 *
 * Only complete answers are stored: status 200, pkt-line framing intact, a `packfile` section,
 * no `ERR` line or band-3 error, a final flush. Entries over a quarter of the cache are not kept;
 * the oldest entries are evicted once the total exceeds the configured size. Concurrent misses
 * on one key wait for the first (single-flight, per process or Worker isolate).
 */
import type { Metrics } from "./metrics.ts";
import type { PackStore } from "../../storage/store.ts";
import type { CommandRequest } from "../../git/command_request.ts";
import type { FetchArgs } from "../../git/fetch_request.ts";
import { sha256 } from "@noble/hashes/sha2.js";
import { toHex } from "../../git/object_id.ts";
import { CACHE_PREFIX } from "./store_layout.ts";

/** Why a fetch cannot be cached, or null. */
export function uncacheable(args: FetchArgs): string | null {
  if (args.shallow.length > 0) return "client is shallow";
  if (args.deepenNot.length > 0 || args.wantRefs.length > 0) return "names refs";
  if (args.waitForDone) return "negotiation";
  if (args.wants.length === 0) return "no wants";
  if (args.other.length > 0) return "unknown arguments";
  return null;
}

/**
 * Whether the key of an answer to `args` has the origin's tags in it (their digest, listed with
 * the client's credentials before the look-up): for `include-tag` fetches without haves. A clone
 * that follows tags (`--single-branch`, `--depth`) writes the tags whose objects the answer
 * brought, so an answer from before a tag was added or moved must not serve it. `git fetch`
 * wants every tag it will write that points at a tip it fetches, and after the pack asks for the
 * tags that point at other objects the pack brought (backfill), so an answer from before a tag
 * changed still ends in the refs and reachable objects a direct fetch gives (at worst with a tag
 * object no ref names any more). Incremental fetches skip that listing: a WAN round trip and,
 * for git v2.0.0's 511 tags, about 55 KB from the origin per fetch.
 */
export function keyedByTags(args: FetchArgs): boolean {
  return args.includeTag && args.haves.length === 0;
}

/** The normalised request: what makes two fetches get the same answer (given the tag digest). */
export function cacheKey(
  repoId: string,
  req: CommandRequest,
  args: FetchArgs,
  tagDigest: string,
): string {
  const parts = [
    `repo ${repoId}`,
    ...req.capabilities.filter((c) => c.startsWith("object-format=")).sort(),
    ...[...new Set(args.wants)].sort().map((w) => `want ${w}`),
    ...[...new Set(args.haves)].sort().map((h) => `have ${h}`),
    `done ${args.done}`,
    `thin-pack ${args.thinPack}`,
    `ofs-delta ${args.ofsDelta}`,
    `include-tag ${args.includeTag}`,
    `sideband-all ${args.sidebandAll}`,
    `deepen ${args.deepen}`,
    `deepen-relative ${args.deepenRelative}`,
    `deepen-since ${args.deepenSince}`,
    `filter ${args.filter}`,
    `tags ${tagDigest}`,
  ];
  return toHex(sha256(new TextEncoder().encode(parts.join("\n"))));
}

/** Store key of an entry. */

/**
 * A pass-through that errors unless the bytes are a complete, successful fetch response (see
 * the module doc) of at most `maxBytes`. Meant for the copy going into the store: an error there
 * stores nothing.
 */
export function completeResponseCheck(maxBytes: number): TransformStream<Uint8Array, Uint8Array> {
  const header = new Uint8Array(4);
  let headerFill = 0;
  /** Payload bytes left in the current packet. */
  let remaining = 0;
  /** The first bytes of the current payload (enough to recognise `packfile` and `ERR`). */
  let prefix = new Uint8Array(10);
  let prefixFill = 0;
  let payloadLength = 0;
  let inPack = false;
  let lastFlush = false;
  let total = 0;
  const fail = (why: string): never => {
    throw new Error(`not cached: ${why}`);
  };
  const judgePayload = () => {
    const p = prefix.subarray(0, prefixFill);
    const text = new TextDecoder().decode(p);
    if (!inPack) {
      if (text.startsWith("ERR ") || text.startsWith("\x01ERR ")) fail("ERR line");
      if (
        payloadLength === 9 && text === "packfile\n" ||
        payloadLength === 10 && text === "\x01packfile\n"
      ) inPack = true;
    } else if (p[0] === 3) fail("remote error in band 3");
    else if (p[0] !== 1 && p[0] !== 2) fail("bad sideband");
  };
  return new TransformStream({
    transform(chunk, controller) {
      total += chunk.byteLength;
      if (total > maxBytes) fail(`larger than ${maxBytes} bytes`);
      let i = 0;
      while (i < chunk.byteLength) {
        if (remaining === 0) {
          header[headerFill++] = chunk[i++];
          if (headerFill < 4) continue;
          headerFill = 0;
          const len = parseInt(new TextDecoder().decode(header), 16);
          if (!/^[0-9a-f]{4}$/.test(new TextDecoder().decode(header))) fail("bad pkt-line");
          lastFlush = len === 0;
          if (len < 4) continue; // flush, delim, response-end
          if (len === 4) fail("empty pkt-line");
          remaining = payloadLength = len - 4;
          prefixFill = 0;
          continue;
        }
        const take = Math.min(remaining, chunk.byteLength - i);
        const want = Math.min(prefix.length, payloadLength) - prefixFill;
        if (want > 0) {
          const n = Math.min(want, take);
          prefix.set(chunk.subarray(i, i + n), prefixFill);
          prefixFill += n;
          if (prefixFill === Math.min(prefix.length, payloadLength)) judgePayload();
        }
        i += take;
        remaining -= take;
      }
      controller.enqueue(chunk);
    },
    flush() {
      if (remaining !== 0 || headerFill !== 0) fail("cut inside a pkt-line");
      if (!inPack) fail("no packfile section");
      if (!lastFlush) fail("no final flush");
      prefix = new Uint8Array(0);
    },
  });
}

export interface ResponseCacheOptions {
  /** Total size of all entries, bytes; 0 turns the cache off. */
  maxBytes: number;
}

/**
 * Entries in the store plus the single-flight of fills. One per process (or Worker isolate):
 * the store and metrics come with each call, since Workers build them per request.
 */
export class CacheFills {
  readonly #fills = new Map<string, Promise<boolean>>();
  #evicting: Promise<void> | null = null;

  /** The fill under way for `storeKey` (resolves to whether it stored the entry), if any. */
  pending(storeKey: string): Promise<boolean> | undefined {
    return this.#fills.get(storeKey);
  }

  /**
   * Claims the fill of `storeKey` (null when another request holds it): from now on, concurrent
   * misses on it wait for this one. The claim must end with `fill` or `abandon`.
   */
  claim(storeKey: string): Fill | null {
    if (this.#fills.has(storeKey)) return null;
    const settled = Promise.withResolvers<boolean>();
    this.#fills.set(storeKey, settled.promise);
    let ended = false;
    const end = (stored: boolean) => {
      if (ended) return;
      ended = true;
      this.#fills.delete(storeKey);
      settled.resolve(stored);
    };
    return {
      abandon: () => end(false),
      fill: async (store, metrics, body, opts) => {
        let stored = false;
        try {
          const limit = Math.floor(opts.maxBytes / 4);
          const { size } = await store.put(
            storeKey,
            body.pipeThrough(completeResponseCheck(limit)),
          );
          metrics.inc("gitedge_response_cache_stored_bytes_total", size);
          stored = true;
        } catch {
          await body.cancel().catch(() => {});
        } finally {
          end(stored);
        }
        if (stored) await this.evict(store, metrics, opts.maxBytes);
        return stored;
      },
    };
  }

  /** Deletes the oldest entries until all of them fit in `maxBytes` (one pass at a time). */
  evict(store: PackStore, metrics: Metrics, maxBytes: number): Promise<void> {
    return this.#evicting ??= (async () => {
      try {
        const entries = (await store.list(CACHE_PREFIX)).sort((a, b) => a.modified - b.modified);
        let total = entries.reduce((n, e) => n + e.size, 0);
        for (const e of entries) {
          if (total <= maxBytes) break;
          await store.delete(e.key);
          total -= e.size;
          metrics.inc("gitedge_response_cache_evictions_total");
        }
      } finally {
        this.#evicting = null;
      }
    })();
  }
}

/** A claimed fill: store the origin's answer, or give the claim up. */
export interface Fill {
  /** Stores `body` if it proves complete; resolves to whether it did. Never rejects. */
  fill(
    store: PackStore,
    metrics: Metrics,
    body: ReadableStream<Uint8Array>,
    opts: ResponseCacheOptions,
  ): Promise<boolean>;
  abandon(): void;
}
