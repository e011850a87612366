/**
 * Git bundles (see git's bundle-format): a header naming the refs a bundle brings and the
 * prerequisites a repository must already have, then one pack. Version 2 for SHA-1, version 3
 * with its `@object-format` capability for SHA-256.
 *
 * {@link joinedPack} makes one pack of several self-contained packs without touching their
 * entries: OFS_DELTA bases are addressed by distance back from the delta, which concatenation
 * keeps, and REF_DELTA bases by id. Only the header's count and the trailer are new.
 *
 * @module
 */

import { sha1 } from "@noble/hashes/legacy.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { hashLength, isObjectId, type ObjectFormat } from "./object_id.ts";
import { PACK_HEADER_LENGTH, PACK_SIGNATURE } from "./pack.ts";

export interface BundleHeader {
  objectFormat: ObjectFormat;
  /** Object ids the receiving repository must have (with everything they reach). */
  prerequisites: string[];
  /** Ref name to object id: what the bundle brings. */
  refs: Record<string, string>;
}

/**
 * The bytes of a bundle header, up to and including the blank line before the pack.
 *
 * @throws {RangeError} for an id of the wrong length or a ref name with a newline or NUL.
 */
export function encodeBundleHeader(h: BundleHeader): Uint8Array {
  const hexLength = hashLength(h.objectFormat) * 2;
  const oid = (id: string) => {
    if (!isObjectId(id) || id.length !== hexLength) throw new RangeError(`bad object id ${id}`);
    return id;
  };
  const lines = h.objectFormat === "sha1"
    ? ["# v2 git bundle"]
    : ["# v3 git bundle", `@object-format=${h.objectFormat}`];
  for (const p of new Set(h.prerequisites)) lines.push(`-${oid(p)}`);
  for (const [name, id] of Object.entries(h.refs)) {
    if (!name.startsWith("refs/") || /[\n\0 ]/.test(name)) {
      throw new RangeError(`bad ref name ${JSON.stringify(name)}`);
    }
    lines.push(`${oid(id)} ${name}`);
  }
  return new TextEncoder().encode(lines.join("\n") + "\n\n");
}

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
