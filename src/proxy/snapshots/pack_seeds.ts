/**
 * Seeding a first snapshot build from a clone's pass-through answer, so the origin computes and
 * sends the full pack once instead of twice (once for the client, once for the build).
 *
 * When a fetch that will start a build goes through to the origin and asks for what a full clone
 * asks (no haves, no depth, no filter, no `want-ref`, no packfile URIs, `ofs-delta`, `done`), its
 * answer is copied, as it streams to the client, into the store: the pack is scanned (structure,
 * sizes, trailer hash: the same checks as a build's own fetch) and kept as segments, as the
 * builder's fetch step keeps its own. The build, once it has listed the origin's tips, takes the
 * seed only if the clone wanted exactly those tips (so its pack holds everything they reach) in
 * the same object format; otherwise, or if the seed failed, it fetches as usual.
 *
 * The client is never slowed down: the copy is dropped (and the build fetches as usual) when the
 * store falls more than {@link MAX_QUEUED_BYTES} behind, when the client goes away or the answer
 * is cut short. At most one seed per repository is kept, and a few in all. Only builds in the
 * process that served the clone can take a seed (the Deno server); on Workers the build runs in a
 * Durable Object, which cannot read another request's stream, so no seeds are made there.
 */
import type { PackStore } from "../../storage/store.ts";
import type { ObjectFormat } from "../../git/object_id.ts";
import type { FetchArgs } from "../../git/fetch_request.ts";
import type { CommandRequest } from "../../git/command_request.ts";
import { PktLineReader } from "../../git/pktline.ts";
import { readFetchResponse } from "../../git/fetch_response.ts";
import { packScanner, type PackSummary } from "../../git/pack_reader.ts";
import { DEFAULT_SEGMENT_BYTES, segmentSink } from "../../storage/segments.ts";
import { seedsPrefix } from "../core/store_layout.ts";

/** The copy is dropped when the store is this far behind the client. */
export const MAX_QUEUED_BYTES = 8 * 1024 * 1024;

/** A staged pack a build may adopt: its scan and its segments in the store. */
export interface SeededPack {
  summary: PackSummary;
  /** Number of segment objects, stored under `${prefix}segment-<i>`, and their size. */
  segments: number;
  segmentBytes: number;
  /** Where the segments are (the adopting build deletes them when it ends). */
  prefix: string;
}

/**
 * Why a fetch's answer cannot seed a build (null: it can). `args` are the arguments the origin
 * got.
 */
export function unseedable(args: FetchArgs): string | null {
  if (args.wants.length === 0) return "no wants";
  if (args.haves.length > 0) return "haves";
  if (
    args.shallow.length > 0 || args.deepen !== null || args.deepenSince !== null ||
    args.deepenNot.length > 0
  ) return "shallow";
  if (args.filter !== null) return "filter";
  if (args.wantRefs.length > 0) return "want-ref";
  if (args.packfileUris !== null) return "packfile URIs";
  if (!args.ofsDelta) return "no ofs-delta";
  if (!args.done || args.waitForDone) return "negotiation";
  if (args.other.length > 0) return "unknown arguments";
  return null;
}

interface Seed {
  key: string;
  format: ObjectFormat;
  prefix: string;
  staged: Promise<SeededPack | null>;
}

/** The seeds of one process: the upload-pack route makes them, the snapshot builder takes them. */
export class PackSeeds {
  readonly #seeds = new Map<string, Seed>();

  constructor(
    readonly store: PackStore,
    readonly opts: { maxSeeds?: number; maxQueuedBytes?: number; segmentBytes?: number } = {},
  ) {}

  /**
   * The stream to send the client for `body` (an upload-pack v2 fetch answer to a request for
   * `wants`): `body` itself unless a seed starts, else the same bytes, copied into the seed
   * (`staged` settles when the copy is stored or given up).
   */
  tee(
    repoId: string,
    wants: string[],
    format: ObjectFormat,
    sidebandAll: boolean,
    body: ReadableStream<Uint8Array>,
  ): { body: ReadableStream<Uint8Array>; staged?: Promise<unknown> } {
    if (this.#seeds.has(repoId) || this.#seeds.size >= (this.opts.maxSeeds ?? 4)) {
      return { body };
    }
    const prefix = `${seedsPrefix(repoId)}${Date.now().toString(36)}-${
      crypto.randomUUID().slice(0, 8)
    }/`;
    const pipe = new TransformStream<Uint8Array, Uint8Array>();
    const staged = this.#stage(pipe.readable, format, sidebandAll, prefix);
    const seed = { key: wantsKey(wants), format, prefix, staged };
    this.#seeds.set(repoId, seed);
    // A copy given up makes room at once (a later clone may seed instead).
    staged.then((pack) => {
      if (pack === null && this.#seeds.get(repoId) === seed) this.#seeds.delete(repoId);
    });
    return {
      body: copying(body, pipe.writable, this.opts.maxQueuedBytes ?? MAX_QUEUED_BYTES),
      staged,
    };
  }

  /**
   * The seed of `repoId` if it holds the pack of exactly `wants` in `format`, once staged; null
   * otherwise (a seed that does not match is deleted). The caller owns the returned segments.
   */
  async take(repoId: string, wants: string[], format: ObjectFormat): Promise<SeededPack | null> {
    const seed = this.#seeds.get(repoId);
    if (!seed) return null;
    this.#seeds.delete(repoId);
    if (seed.key !== wantsKey(wants) || seed.format !== format) {
      await this.#drop(seed);
      return null;
    }
    return await seed.staged;
  }

  /** Deletes the seed of `repoId`, if any, once it has stopped writing. */
  async discard(repoId: string): Promise<void> {
    const seed = this.#seeds.get(repoId);
    if (!seed) return;
    this.#seeds.delete(repoId);
    await this.#drop(seed);
  }

  /** Seeds kept now (for tests and metrics). */
  get size(): number {
    return this.#seeds.size;
  }

  async #drop(seed: Seed): Promise<void> {
    if (await seed.staged) await this.#deleteUnder(seed.prefix);
  }

  async #deleteUnder(prefix: string): Promise<void> {
    for (const obj of await this.store.list(prefix)) await this.store.delete(obj.key);
  }

  /** Reads the answer's pack into the store; null (with nothing left behind) if it fails. */
  async #stage(
    answer: ReadableStream<Uint8Array>,
    format: ObjectFormat,
    sidebandAll: boolean,
    prefix: string,
  ): Promise<SeededPack | null> {
    const reader = new PktLineReader(answer);
    try {
      let staged: SeededPack | null = null;
      for await (const part of readFetchResponse(reader, { sidebandAll })) {
        // A full clone's answer is the pack alone: any other section (URIs, shallow lines)
        // means the pack is not the self-contained one a snapshot needs.
        if (part.section !== "packfile") return await this.#failed(prefix);
        const scanner = packScanner({ objectFormat: format });
        const sink = segmentSink(
          this.store,
          (i) => `${prefix}segment-${i}`,
          this.opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES,
        );
        await part.pack.pipeThrough(scanner.stream).pipeTo(sink.writable);
        staged = {
          summary: await scanner.summary,
          segments: sink.count(),
          segmentBytes: this.opts.segmentBytes ?? DEFAULT_SEGMENT_BYTES,
          prefix,
        };
      }
      return staged ?? await this.#failed(prefix);
    } catch {
      return await this.#failed(prefix);
    } finally {
      await reader.cancel().catch(() => {});
    }
  }

  async #failed(prefix: string): Promise<null> {
    await this.#deleteUnder(prefix).catch(() => {});
    return null;
  }
}

/**
 * The answer's body for the client, seeding a build when the edge has seeds and `originArgs`
 * (what the origin was asked) are a full clone's. Call only for an answer the origin served and
 * that starts a build, before the build is scheduled.
 */
export function seedingBody(
  deps: { packSeeds?: PackSeeds; waitUntil?: (work: Promise<unknown>) => void },
  repoId: string,
  req: CommandRequest,
  originArgs: FetchArgs,
  body: ReadableStream<Uint8Array> | null,
): ReadableStream<Uint8Array> | null {
  const seeds = deps.packSeeds;
  if (!seeds || !body || unseedable(originArgs) !== null) return body;
  const format: ObjectFormat = req.capabilities.includes("object-format=sha256")
    ? "sha256"
    : "sha1";
  const seeded = seeds.tee(repoId, originArgs.wants, format, originArgs.sidebandAll, body);
  // The copy outlives the response when the client goes away: the runtime waits for it.
  if (seeded.staged) deps.waitUntil?.(seeded.staged);
  return seeded.body;
}

function wantsKey(wants: string[]): string {
  return [...new Set(wants)].sort().join(" ");
}

/**
 * `body` as read by its consumer, each chunk also written to `copy` unless the copy has fallen
 * more than `maxQueued` bytes behind (then the copy is aborted and the consumer goes on alone).
 * Pull-based: nothing is read ahead of the consumer.
 */
function copying(
  body: ReadableStream<Uint8Array>,
  copy: WritableStream<Uint8Array>,
  maxQueued: number,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const writer = copy.getWriter();
  let queued = 0;
  let dropped = false;
  const drop = (reason: unknown) => {
    if (dropped) return;
    dropped = true;
    writer.abort(reason).catch(() => {});
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next;
      try {
        next = await reader.read();
      } catch (error) {
        drop(error);
        controller.error(error);
        return;
      }
      if (next.done) {
        if (!dropped) writer.close().catch(() => {});
        controller.close();
        return;
      }
      const chunk = next.value;
      controller.enqueue(chunk);
      if (dropped) return;
      if (queued + chunk.byteLength > maxQueued) {
        drop(new Error("the store fell behind the client"));
        return;
      }
      queued += chunk.byteLength;
      writer.write(chunk.slice()).then(() => queued -= chunk.byteLength, drop);
    },
    async cancel(reason) {
      drop(reason);
      await reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}
