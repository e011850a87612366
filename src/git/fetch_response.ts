/**
 * The protocol v2 `fetch` response (see gitprotocol-v2): line sections (acknowledgments,
 * shallow-info, wanted-refs, packfile-uris) and the side-band multiplexed packfile, read section
 * by section and encoded one section at a time.
 *
 * @module
 */

import { ProtocolError, rejectErrLine } from "./errors.ts";
import { concat, DELIM_PKT, encodePkt, type Pkt, type PktLineReader, pktText } from "./pktline.ts";
import { type DemuxOptions, demuxSideband, readSidebandPkt } from "./sideband.ts";

const encoder = new TextEncoder();

/** Names of the line-oriented sections of a `fetch` response, in Git's order. */
export type FetchSectionName = "acknowledgments" | "shallow-info" | "wanted-refs" | "packfile-uris";

/** One section of a `fetch` response. */
export type FetchResponsePart =
  | { section: FetchSectionName; lines: string[] }
  | { section: "packfile"; pack: ReadableStream<Uint8Array> };

/** Options for {@link readFetchResponse}. */
export interface FetchResponseOptions extends DemuxOptions {
  /** The request carried `sideband-all`: every line is wrapped in band 1. */
  sidebandAll?: boolean;
}

const SECTION_NAMES: ReadonlySet<string> = new Set([
  "acknowledgments",
  "shallow-info",
  "wanted-refs",
  "packfile-uris",
  "packfile",
]);

/** Markers for special packets, distinct from any text line. */
const FLUSH = Symbol("flush");
const DELIM = Symbol("delim");
const END = Symbol("end");
type Marker = typeof FLUSH | typeof DELIM | typeof END;

/** Reads the next protocol line, unwrapping band 1 when `sidebandAll` is on. */
async function nextLine(
  reader: PktLineReader,
  opts: FetchResponseOptions,
): Promise<string | Marker> {
  let pkt: Pkt | null;
  if (opts.sidebandAll) {
    const got = await readSidebandPkt(reader, opts);
    pkt = got instanceof Uint8Array ? { type: "data", data: got } : got;
  } else {
    pkt = await reader.read();
  }
  if (pkt === null) return END;
  if (pkt.type === "flush") return FLUSH;
  if (pkt.type === "delim") return DELIM;
  if (pkt.type === "response-end") return END;
  const line = pktText(pkt);
  rejectErrLine(line);
  return line;
}

/**
 * Reads a `fetch` response section by section.
 *
 * Line sections are yielded whole. The `packfile` part, always last, yields
 * a stream of the demultiplexed pack bytes; consume or cancel it before
 * resuming the generator. A response whose acknowledgments end in a flush
 * (no `ready`) ends without a packfile.
 *
 * @throws {ProtocolError} `"bad-response"` for unknown or out-of-order
 * sections or a response cut short; {@link ProtocolRemoteError} for `ERR`.
 */
export async function* readFetchResponse(
  reader: PktLineReader,
  opts: FetchResponseOptions = {},
): AsyncGenerator<FetchResponsePart> {
  const seen = new Set<string>();
  for (;;) {
    const header = await nextLine(reader, opts);
    if (typeof header !== "string") {
      throw new ProtocolError(
        "bad-response",
        `expected a section header, got ${markerName(header)}`,
      );
    }
    checkSectionOrder(header, seen);
    if (header === "packfile") {
      yield { section: "packfile", pack: demuxSideband(reader, opts) };
      return;
    }
    const section = header as FetchSectionName;
    const lines: string[] = [];
    let end: string | Marker;
    while (typeof (end = await nextLine(reader, opts)) === "string") lines.push(end);
    if (end === END) {
      throw new ProtocolError("bad-response", `response ended inside section "${section}"`);
    }
    yield { section, lines };
    if (end === FLUSH) {
      if (section !== "acknowledgments") {
        throw new ProtocolError(
          "bad-response",
          `section "${section}" ended the response without a packfile`,
        );
      }
      return;
    }
  }
}

/**
 * Git documents the order acknowledgments, shallow-info, wanted-refs,
 * packfile-uris, packfile, but git 2.39 upload-pack itself sends wanted-refs
 * before shallow-info; so only check that sections are known, unique,
 * acknowledgments come first and packfile-uris precedes packfile.
 */
function checkSectionOrder(header: string, seen: Set<string>): void {
  if (!SECTION_NAMES.has(header)) {
    throw new ProtocolError("bad-response", `unknown response section "${header}"`);
  }
  if (seen.has(header)) {
    throw new ProtocolError("bad-response", `response section "${header}" appears twice`);
  }
  if (header === "acknowledgments" && seen.size > 0) {
    throw new ProtocolError("bad-response", `"acknowledgments" must be the first section`);
  }
  seen.add(header);
}

function markerName(m: Marker): string {
  return m === FLUSH ? "flush" : m === DELIM ? "delim" : "response-end";
}

/**
 * Encodes one line section of a `fetch` response: header, lines, delimiter.
 * With `sidebandAll` each line is wrapped in band 1, as upload-pack does.
 */
export function encodeFetchSection(
  name: FetchSectionName | "packfile",
  lines: readonly string[],
  sidebandAll = false,
): Uint8Array {
  const wrap = (text: string) => {
    const bytes = encoder.encode(text + "\n");
    if (!sidebandAll) return encodePkt(bytes);
    const banded = new Uint8Array(bytes.length + 1);
    banded[0] = 1;
    banded.set(bytes, 1);
    return encodePkt(banded);
  };
  const parts = [wrap(name), ...lines.map(wrap)];
  if (name !== "packfile") parts.push(DELIM_PKT);
  return concat(parts);
}
