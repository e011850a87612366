/**
 * Object ids: the two hash functions a repository may use, their lengths, and the hex form of an
 * id as the protocol writes it.
 *
 * @module
 */

import { ProtocolError } from "./errors.ts";

/** A repository's hash function: object ids, REF_DELTA bases and pack trailers use it. */
export type ObjectFormat = "sha1" | "sha256";

/** Bytes of one hash (object id, REF_DELTA base, pack trailer) in `format`. */
export function hashLength(format: ObjectFormat): number {
  return format === "sha256" ? 32 : 20;
}

/** `bytes` as lower-case hex (no npm import: the client loads this at every clone's start). */
export function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

const OID_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** True for a full lower-case SHA-1 (40) or SHA-256 (64) hex object id. */
export function isObjectId(s: string): boolean {
  return OID_RE.test(s);
}

/**
 * `s` if it is an object id (see {@link isObjectId}).
 *
 * @throws {ProtocolError} `"bad-oid"` naming `context` otherwise.
 */
export function requireOid(s: string, context: string): string {
  if (!isObjectId(s)) {
    throw new ProtocolError("bad-oid", `${context}: "${s}" is not a 40 or 64 digit hex object id`);
  }
  return s;
}
