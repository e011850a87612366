/**
 * Lines of the `packfile-uris` section of a `fetch` response (see gitprotocol-v2 and
 * technical/packfile-uri): `<pack hash> <uri>`, one pack each.
 *
 * @module
 */

import { ProtocolError } from "./errors.ts";
import { isObjectId } from "./object_id.ts";

/**
 * One line of a `packfile-uris` section.
 *
 * @example One line of a `packfile-uris` section
 * ```ts
 * const entry: PackfileUri = parsePackfileUriLine("0123456789abcdef0123456789abcdef01234567 https://edge.example/p.pack");
 * entry.uri; // "https://edge.example/p.pack"
 * ```
 */
export interface PackfileUri {
  /** The pack's trailer checksum: 40 hex digits (SHA-1), or 64 in a SHA-256 repository. */
  hash: string;
  uri: string;
}

/**
 * Parses `<pack hash> <uri>` (40 or 64 hex digits).
 *
 * @throws {ProtocolError} `"bad-packfile-uri"` when malformed.
 */
export function parsePackfileUriLine(line: string): PackfileUri {
  const space = line.indexOf(" ");
  const hash = space < 0 ? line : line.slice(0, space);
  const uri = space < 0 ? "" : line.slice(space + 1);
  if (!isObjectId(hash) || uri === "") {
    throw new ProtocolError(
      "bad-packfile-uri",
      `expected "<40 or 64 hex hash> <uri>", got "${line}"`,
    );
  }
  return { hash, uri };
}

/**
 * Formats a `packfile-uris` line.
 *
 * @throws {ProtocolError} `"bad-packfile-uri"` for a bad hash or a URI containing whitespace.
 */
export function formatPackfileUriLine(hash: string, uri: string): string {
  if (!isObjectId(hash)) {
    throw new ProtocolError(
      "bad-packfile-uri",
      `pack hash "${hash}" is not 40 or 64 hex digits`,
    );
  }
  if (uri === "" || /\s/.test(uri)) {
    throw new ProtocolError("bad-packfile-uri", `packfile URI "${uri}" is empty or has whitespace`);
  }
  return `${hash} ${uri}`;
}
