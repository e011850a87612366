/**
 * One pack made of several self-contained packs without touching their entries: OFS_DELTA bases
 * are addressed by distance back from the delta, which concatenation keeps, and REF_DELTA bases
 * by id. Only the header's object count and the trailer are new; the trailer is hashed as the
 * bytes go out, so memory stays flat in the packs' size. Used for a bundle of a layer of several
 * packs (bundle.ts) and for a plain clone streamed from the snapshot (src/proxy/fetch/streamed_fetch.ts).
 *
 * The packs must hold distinct objects for git's `index-pack --strict` (`transfer.fsckObjects`),
 * which refuses an object that appears twice in one pack; without `--strict` git accepts it.
 *
 * @module
 */

import { sha1 } from "@noble/hashes/legacy.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { hashLength, type ObjectFormat } from "./object_id.ts";
import { PACK_HEADER_LENGTH, PACK_SIGNATURE } from "./pack.ts";

/** One pack of a {@link joinedPack}: its size and object count, and its bytes when asked. */
export interface PackPart {
  size: number;
  objects: number;
  open(): Promise<ReadableStream<Uint8Array>>;
}

/** Size in bytes of the pack {@link joinedPack} makes of `parts`. */
export function joinedPackSize(
  parts: readonly Pick<PackPart, "size">[],
  format: ObjectFormat,
): number {
  const trailer = hashLength(format);
  return parts.reduce((n, p) => n + p.size - PACK_HEADER_LENGTH - trailer, PACK_HEADER_LENGTH) +
    trailer;
}

/**
 * One pack holding every entry of `parts` (self-contained packs, read one after the other, each
 * when the previous ends): a pack header for all of them, each pack's entries as stored, one
 * trailer hashed as the bytes go out. A part shorter or longer than its `size` errors the stream.
 */
export function joinedPack(
  parts: readonly PackPart[],
  format: ObjectFormat,
): ReadableStream<Uint8Array> {
  const trailerLength = hashLength(format);
  const hash = format === "sha1" ? sha1.create() : sha256.create();
  const objects = parts.reduce((n, p) => n + p.objects, 0);
  if (objects > 0xffffffff) throw new RangeError(`too many objects for one pack: ${objects}`);
  const header = new Uint8Array(PACK_HEADER_LENGTH);
  header.set(PACK_SIGNATURE);
  const view = new DataView(header.buffer);
  view.setUint32(4, 2);
  view.setUint32(8, objects);
  let next = 0;
  let reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  // Where the current part stands: bytes of it read, and its entries' span [start, end).
  let at = 0;
  let end = 0;
  let started = false;
  const out = (controller: ReadableStreamDefaultController<Uint8Array>, bytes: Uint8Array) => {
    if (bytes.length === 0) return;
    hash.update(bytes);
    controller.enqueue(bytes);
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!started) {
        started = true;
        out(controller, header);
        return;
      }
      for (;;) {
        if (reader === null) {
          if (next === parts.length) {
            controller.enqueue(hash.digest());
            controller.close();
            return;
          }
          const part = parts[next++];
          if (part.size < PACK_HEADER_LENGTH + trailerLength) {
            throw new RangeError(`pack part ${next - 1} is too short`);
          }
          reader = (await part.open()).getReader();
          at = 0;
          end = part.size - trailerLength;
        }
        const { done, value } = await reader.read();
        if (done) {
          if (at !== end + trailerLength) {
            throw new RangeError(
              `pack part ${next - 1} ended at ${at}, expected ${end + trailerLength}`,
            );
          }
          reader = null;
          continue;
        }
        const from = Math.max(at, PACK_HEADER_LENGTH) - at;
        const to = Math.min(at + value.length, end) - at;
        at += value.length;
        if (at > end + trailerLength) {
          await reader.cancel().catch(() => {});
          throw new RangeError(`pack part ${next - 1} is longer than ${end + trailerLength}`);
        }
        if (to > from) {
          out(controller, value.subarray(from, to));
          return;
        }
      }
    },
    async cancel(reason) {
      await reader?.cancel(reason);
    },
  });
}

/**
 * The pack of `parts` as one: a single part's stored bytes as they are (its header and trailer
 * are already right, so nothing is hashed), several joined by {@link joinedPack}. Either way a
 * part shorter or longer than its `size` errors the stream.
 */
export function onePack(
  parts: readonly PackPart[],
  format: ObjectFormat,
): ReadableStream<Uint8Array> {
  if (parts.length !== 1) return joinedPack(parts, format);
  const [part] = parts;
  let reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  let at = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      reader ??= (await part.open()).getReader();
      const { done, value } = await reader.read();
      if (done) {
        if (at !== part.size) throw new RangeError(`pack ended at ${at}, expected ${part.size}`);
        controller.close();
        return;
      }
      at += value.length;
      if (at > part.size) {
        await reader.cancel().catch(() => {});
        throw new RangeError(`pack is longer than ${part.size}`);
      }
      controller.enqueue(value);
    },
    async cancel(reason) {
      await reader?.cancel(reason);
    },
  });
}
