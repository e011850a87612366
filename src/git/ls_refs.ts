/**
 * The protocol v2 `ls-refs` command (see gitprotocol-v2): its arguments and the lines of its
 * response.
 *
 * @module
 */

import { ProtocolError } from "./errors.ts";
import { requireOid } from "./object_id.ts";
import { PktLineReader, pktText } from "./pktline.ts";

/** The arguments of an `ls-refs` command. */
export interface LsRefsArgs {
  symrefs: boolean;
  peel: boolean;
  unborn: boolean;
  refPrefixes: string[];
  /** Unrecognised argument lines, kept verbatim. */
  other: string[];
}

/** Interprets `ls-refs` argument lines. */
export function parseLsRefsArgs(args: readonly string[]): LsRefsArgs {
  const a: LsRefsArgs = { symrefs: false, peel: false, unborn: false, refPrefixes: [], other: [] };
  for (const line of args) {
    if (line === "symrefs") a.symrefs = true;
    else if (line === "peel") a.peel = true;
    else if (line === "unborn") a.unborn = true;
    else if (line.startsWith("ref-prefix ")) a.refPrefixes.push(line.slice(11));
    else a.other.push(line);
  }
  return a;
}

/** `ls-refs` argument lines in git's order: peel, symrefs, unborn, ref-prefix…, others. */
export function serializeLsRefsArgs(a: LsRefsArgs): string[] {
  const out: string[] = [];
  if (a.peel) out.push("peel");
  if (a.symrefs) out.push("symrefs");
  if (a.unborn) out.push("unborn");
  for (const p of a.refPrefixes) out.push(`ref-prefix ${p}`);
  out.push(...a.other);
  return out;
}

/** One line of an `ls-refs` response. */
export interface LsRefsLine {
  /** The object id, or `null` for an unborn ref (`unborn HEAD ...`). */
  oid: string | null;
  name: string;
  symrefTarget?: string;
  peeled?: string;
}

/**
 * Parses `<oid> <name> [symref-target:<t>] [peeled:<oid>]` or
 * `unborn <name> [symref-target:<t>]`.
 *
 * @throws {ProtocolError} `"bad-ls-refs"` for malformed lines, `"bad-oid"` for bad ids.
 */
export function parseLsRefsLine(line: string): LsRefsLine {
  const [head, name, ...attrs] = line.split(" ");
  if (name === undefined || name === "") {
    throw new ProtocolError("bad-ls-refs", `malformed ls-refs line "${line}"`);
  }
  const ref: LsRefsLine = { oid: head === "unborn" ? null : requireOid(head, "ls-refs"), name };
  for (const attr of attrs) {
    if (attr.startsWith("symref-target:")) ref.symrefTarget = attr.slice(14);
    else if (attr.startsWith("peeled:")) ref.peeled = requireOid(attr.slice(7), "ls-refs peeled");
    else throw new ProtocolError("bad-ls-refs", `unknown ls-refs attribute "${attr}" in "${line}"`);
  }
  return ref;
}

/** Formats an `ls-refs` response line (without newline). */
export function formatLsRefsLine(ref: LsRefsLine): string {
  let line = `${ref.oid ?? "unborn"} ${ref.name}`;
  if (ref.symrefTarget !== undefined) line += ` symref-target:${ref.symrefTarget}`;
  if (ref.peeled !== undefined) line += ` peeled:${ref.peeled}`;
  return line;
}

/**
 * The refs of a whole `ls-refs` answer, name → id (unborn refs left out), read up to its flush
 * within `maxBytes` of lines and `maxRefs` refs; the body is released either way.
 *
 * @throws {ProtocolError} `"bad-ls-refs"` when the answer is cut short, too large, an `ERR`
 * packet or not an answer; `"bad-oid"` for bad ids.
 */
export async function readLsRefsAnswer(
  body: ReadableStream<Uint8Array>,
  bounds: { maxBytes: number; maxRefs?: number },
): Promise<Record<string, string>> {
  const reader = new PktLineReader(body);
  const refs: Record<string, string> = {};
  let bytes = 0, count = 0;
  try {
    for (;;) {
      const pkt = await reader.read();
      if (pkt?.type === "flush") return refs;
      if (pkt?.type !== "data") {
        throw new ProtocolError("bad-ls-refs", `ls-refs ended with ${pkt?.type ?? "EOF"}`);
      }
      const line = pktText(pkt).replace(/\n$/, "");
      bytes += pkt.data.byteLength;
      if (bytes > bounds.maxBytes || ++count > (bounds.maxRefs ?? Infinity)) {
        throw new ProtocolError("bad-ls-refs", "ls-refs answer over its bound");
      }
      if (line.startsWith("ERR ")) throw new ProtocolError("bad-ls-refs", line.slice(0, 200));
      const ref = parseLsRefsLine(line);
      if (ref.oid) refs[ref.name] = ref.oid;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
