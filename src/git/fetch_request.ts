/**
 * The arguments of a protocol v2 `fetch` request (see gitprotocol-v2), parsed into
 * {@link FetchArgs} and written back in git's order.
 *
 * @module
 */

import { argKeyword } from "./command_request.ts";
import { ProtocolError } from "./errors.ts";
import { requireOid } from "./object_id.ts";

/** The arguments of a `fetch` command. */
export interface FetchArgs {
  wants: string[];
  haves: string[];
  done: boolean;
  thinPack: boolean;
  ofsDelta: boolean;
  noProgress: boolean;
  includeTag: boolean;
  sidebandAll: boolean;
  /** Protocols from `packfile-uris <p1>,<p2>`; `null` when the client did not ask. */
  packfileUris: string[] | null;
  /** Object ids from `shallow` lines. */
  shallow: string[];
  deepen: number | null;
  deepenRelative: boolean;
  /** Seconds since the epoch. */
  deepenSince: number | null;
  deepenNot: string[];
  filter: string | null;
  wantRefs: string[];
  waitForDone: boolean;
  /** Unrecognised argument lines, kept verbatim and in order. */
  other: string[];
}

/** A `FetchArgs` with nothing requested. */
export function emptyFetchArgs(): FetchArgs {
  return {
    wants: [],
    haves: [],
    done: false,
    thinPack: false,
    ofsDelta: false,
    noProgress: false,
    includeTag: false,
    sidebandAll: false,
    packfileUris: null,
    shallow: [],
    deepen: null,
    deepenRelative: false,
    deepenSince: null,
    deepenNot: [],
    filter: null,
    wantRefs: [],
    waitForDone: false,
    other: [],
  };
}

type FlagKey =
  | "done"
  | "thinPack"
  | "ofsDelta"
  | "noProgress"
  | "includeTag"
  | "sidebandAll"
  | "deepenRelative"
  | "waitForDone";

const FETCH_FLAGS: Record<string, FlagKey> = {
  "done": "done",
  "thin-pack": "thinPack",
  "ofs-delta": "ofsDelta",
  "no-progress": "noProgress",
  "include-tag": "includeTag",
  "sideband-all": "sidebandAll",
  "deepen-relative": "deepenRelative",
  "wait-for-done": "waitForDone",
};

function parseCount(value: string, context: string, min: number): number {
  if (!/^[0-9]+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value))) {
    throw new ProtocolError("bad-fetch-arg", `${context}: "${value}" is not a valid number`);
  }
  return Number(value);
}

function requireValue(value: string, context: string): string {
  if (value === "") throw new ProtocolError("bad-fetch-arg", `${context}: missing value`);
  return value;
}

/**
 * Interprets `fetch` argument lines.
 *
 * @throws {ProtocolError} `"bad-oid"` for malformed object ids, `"bad-fetch-arg"`
 * for malformed numbers or missing values.
 */
export function parseFetchArgs(args: readonly string[]): FetchArgs {
  const f = emptyFetchArgs();
  for (const line of args) {
    const flag = FETCH_FLAGS[line];
    if (flag !== undefined) {
      f[flag] = true;
      continue;
    }
    const keyword = argKeyword(line);
    const value = line.slice(keyword.length + 1);
    switch (keyword) {
      case "want":
        f.wants.push(requireOid(value, "want"));
        break;
      case "have":
        f.haves.push(requireOid(value, "have"));
        break;
      case "shallow":
        f.shallow.push(requireOid(value, "shallow"));
        break;
      case "deepen":
        f.deepen = parseCount(value, "deepen", 1);
        break;
      case "deepen-since":
        f.deepenSince = parseCount(value, "deepen-since", 0);
        break;
      case "deepen-not":
        f.deepenNot.push(requireValue(value, "deepen-not"));
        break;
      case "filter":
        f.filter = requireValue(value, "filter");
        break;
      case "want-ref":
        f.wantRefs.push(requireValue(value, "want-ref"));
        break;
      case "packfile-uris":
        f.packfileUris = requireValue(value, "packfile-uris").split(",");
        break;
      default:
        f.other.push(line);
    }
  }
  return f;
}

/**
 * `fetch` argument lines in the order git 2.39 writes them: wait-for-done,
 * thin-pack, no-progress, include-tag, ofs-delta, sideband-all, shallow,
 * deepen, deepen-since, deepen-not, deepen-relative, filter, packfile-uris,
 * want, want-ref, have, then unrecognised lines, then done.
 */
export function serializeFetchArgs(f: FetchArgs): string[] {
  const out: string[] = [];
  const flag = (on: boolean, line: string) => on && out.push(line);
  flag(f.waitForDone, "wait-for-done");
  flag(f.thinPack, "thin-pack");
  flag(f.noProgress, "no-progress");
  flag(f.includeTag, "include-tag");
  flag(f.ofsDelta, "ofs-delta");
  flag(f.sidebandAll, "sideband-all");
  for (const oid of f.shallow) out.push(`shallow ${oid}`);
  if (f.deepen !== null) out.push(`deepen ${f.deepen}`);
  if (f.deepenSince !== null) out.push(`deepen-since ${f.deepenSince}`);
  for (const rev of f.deepenNot) out.push(`deepen-not ${rev}`);
  flag(f.deepenRelative, "deepen-relative");
  if (f.filter !== null) out.push(`filter ${f.filter}`);
  if (f.packfileUris !== null) out.push(`packfile-uris ${f.packfileUris.join(",")}`);
  for (const oid of f.wants) out.push(`want ${oid}`);
  for (const ref of f.wantRefs) out.push(`want-ref ${ref}`);
  for (const oid of f.haves) out.push(`have ${oid}`);
  out.push(...f.other);
  flag(f.done, "done");
  return out;
}
