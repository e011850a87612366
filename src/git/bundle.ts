/**
 * Git bundles (see git's bundle-format): a header naming the refs a bundle brings and the
 * prerequisites a repository must already have, then one pack. Version 2 for SHA-1, version 3
 * with its `@object-format` capability for SHA-256.
 *
 * A bundle's pack may join several stored packs: {@link joinedPack} (pack_join.ts).
 *
 * @module
 */

import { hashLength, isObjectId, type ObjectFormat } from "./object_id.ts";

export { joinedPack, joinedPackSize, type PackPart } from "./pack_join.ts";

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
