/**
 * Packfile vocabulary shared by the pack reader, writer and splitter: object type codes,
 * the per-entry record, and the pack error type.
 *
 * Layout of a version 2 pack: `"PACK"`, version (u32 BE), object count (u32 BE), then each
 * entry as `type+size varint [+ OFS_DELTA offset varint | REF_DELTA 20-byte id]` followed by
 * a zlib stream, then the SHA-1 of everything before it.
 *
 * @module
 */

import { GitFormatError, type GitFormatErrorOptions } from "./errors.ts";

/** Pack object type: commit. */
export const OBJ_COMMIT = 1;
/** Pack object type: tree. */
export const OBJ_TREE = 2;
/** Pack object type: blob. */
export const OBJ_BLOB = 3;
/** Pack object type: annotated tag. */
export const OBJ_TAG = 4;
/** Pack entry type: delta against an earlier entry, addressed by relative offset. */
export const OBJ_OFS_DELTA = 6;
/** Pack entry type: delta against an object addressed by its id. */
export const OBJ_REF_DELTA = 7;

/** The entry type codes that may appear in a pack. */
export type ObjectType =
  | typeof OBJ_COMMIT
  | typeof OBJ_TREE
  | typeof OBJ_BLOB
  | typeof OBJ_TAG
  | typeof OBJ_OFS_DELTA
  | typeof OBJ_REF_DELTA;

/** Length of the pack header (`PACK`, version, count). */
export const PACK_HEADER_LENGTH = 12;
/** Length of the SHA-1 trailer. */
export const PACK_TRAILER_LENGTH = 20;

/** The pack signature bytes, `"PACK"`. */
export const PACK_SIGNATURE: readonly number[] = [0x50, 0x41, 0x43, 0x4b];

/** True for the codes that may appear as a pack entry type. */
export function isObjectType(type: number): type is ObjectType {
  return (type >= OBJ_COMMIT && type <= OBJ_TAG) || type === OBJ_OFS_DELTA ||
    type === OBJ_REF_DELTA;
}

/** Human-readable name of a pack entry type, as `git verify-pack` prints it. */
export function typeName(type: number): string {
  switch (type) {
    case OBJ_COMMIT:
      return "commit";
    case OBJ_TREE:
      return "tree";
    case OBJ_BLOB:
      return "blob";
    case OBJ_TAG:
      return "tag";
    case OBJ_OFS_DELTA:
      return "ofs-delta";
    case OBJ_REF_DELTA:
      return "ref-delta";
    default:
      return `type-${type}`;
  }
}

/** One entry of a pack, as located by a streaming scan. */
export interface PackEntry {
  /** Position of the entry in the pack (0-based). */
  index: number;
  /** Absolute byte offset of the entry header in the pack. */
  offset: number;
  /** Entry type code ({@link ObjectType}). */
  type: number;
  /** Inflated size from the entry header (for deltas: the delta's size, not the object's). */
  size: number;
  /** Bytes of the type/size varint plus the delta base reference, if any. */
  headerLength: number;
  /** Bytes of the zlib stream. */
  compressedLength: number;
  /** `offset + headerLength + compressedLength`: where the next entry (or the trailer) starts. */
  end: number;
  /** For OFS_DELTA: absolute offset of the base entry. */
  baseOffset?: number;
  /** For REF_DELTA: hex id of the base object. */
  baseId?: string;
}

/** Machine-readable reasons a pack is rejected. */
export type PackErrorCode =
  | "bad-signature"
  | "bad-version"
  | "truncated"
  | "bad-checksum"
  | "bad-zlib"
  | "size-mismatch"
  | "bad-delta-base"
  | "bad-type"
  | "bad-header"
  | "trailing-data"
  | "bad-count";

/** A malformed pack, or a pack operation that would produce one. */
export class PackFormatError extends GitFormatError {
  override name = "PackFormatError";
  declare readonly code: PackErrorCode;
  constructor(code: PackErrorCode, message: string, options?: GitFormatErrorOptions) {
    super(code, message, options);
  }
}
