/**
 * Git protocol v2 messages (see gitprotocol-v2): the capability
 * advertisement, command requests, `fetch` and `ls-refs` arguments, and the
 * sectioned `fetch` response including `packfile-uris`.
 *
 * Lines are handled without their trailing `"\n"`. Serializers add newlines
 * exactly where Git 2.39 itself writes them, so a request or advertisement
 * produced by git round-trips byte for byte.
 *
 * @module
 */

import { GitFormatError } from "./errors.ts";
import {
  concat,
  decodePkts,
  DELIM_PKT,
  encodePkt,
  FLUSH_PKT,
  MAX_PKT_DATA,
  type Pkt,
  PktLineError,
  PktLineReader,
  pktText,
} from "./pktline.ts";
import { type DemuxOptions, demuxSideband, readSidebandPkt } from "./sideband.ts";

const encoder = new TextEncoder();

/** A protocol v2 message had the wrong structure; `code` says which part. */
export class ProtocolError extends GitFormatError {
  override name = "ProtocolError";
}

/** The server sent an `ERR <message>` packet. */
export class ProtocolRemoteError extends GitFormatError {
  override name = "ProtocolRemoteError";
  /** The server's message. */
  readonly remoteMessage: string;

  constructor(remoteMessage: string) {
    super("remote-error", `remote error: ${remoteMessage}`);
    this.remoteMessage = remoteMessage;
  }
}

function textLine(line: string): Uint8Array {
  return encodePkt(line + "\n");
}

/** Throws {@link ProtocolRemoteError} if `line` is an `ERR` packet. */
function rejectErrLine(line: string): void {
  if (line.startsWith("ERR ")) throw new ProtocolRemoteError(line.slice(4));
}

// ---------------------------------------------------------------------------
// Object ids

const OID_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** True for a full lower-case SHA-1 (40) or SHA-256 (64) hex object id. */
export function isObjectId(s: string): boolean {
  return OID_RE.test(s);
}

function requireOid(s: string, context: string): string {
  if (!isObjectId(s)) {
    throw new ProtocolError("bad-oid", `${context}: "${s}" is not a 40 or 64 digit hex object id`);
  }
  return s;
}

// ---------------------------------------------------------------------------
// Capability advertisement

/** One advertised capability: `key` or `key=value`. */
export interface Capability {
  key: string;
  value?: string;
}

/** A protocol v2 capability advertisement (the lines after `version 2`). */
export interface CapabilityAdvertisement {
  capabilities: Capability[];
}

function parseCapability(line: string): Capability {
  if (line === "") throw new ProtocolError("bad-advertisement", "empty capability line");
  const eq = line.indexOf("=");
  return eq < 0 ? { key: line } : { key: line.slice(0, eq), value: line.slice(eq + 1) };
}

function formatCapability(c: Capability): string {
  return c.value === undefined ? c.key : `${c.key}=${c.value}`;
}

/**
 * Reads a capability advertisement: `version 2`, capability lines, flush.
 * A leading smart-HTTP `# service=...` line and its flush are skipped.
 *
 * @throws {ProtocolError} `"bad-advertisement"` if the first line is not
 * `version 2` or the message does not end in a flush.
 */
export async function readCapabilityAdvertisement(
  reader: PktLineReader,
): Promise<CapabilityAdvertisement> {
  let pkts = await readUntilFlush(reader, "bad-advertisement", "capability advertisement");
  const first = pkts[0];
  if (first?.type === "data" && pktText(first).startsWith("# service=")) {
    pkts = pkts.concat(
      await readUntilFlush(reader, "bad-advertisement", "capability advertisement"),
    );
  }
  return parseCapabilityAdvertisement(pkts);
}

/**
 * Reads packets up to and including the next flush.
 *
 * @throws {ProtocolError} with `code` if the stream ends first.
 */
async function readUntilFlush(reader: PktLineReader, code: string, what: string): Promise<Pkt[]> {
  const pkts: Pkt[] = [];
  for (;;) {
    const pkt = await reader.read();
    if (pkt === null) {
      throw new ProtocolError(code, `${what} ended before its flush packet`);
    }
    pkts.push(pkt);
    if (pkt.type === "flush") return pkts;
  }
}

function describe(pkt: Pkt | undefined): string {
  return pkt === undefined ? "end of input" : `a ${pkt.type} packet`;
}

function toPkts(input: Uint8Array | readonly Pkt[]): readonly Pkt[] {
  return input instanceof Uint8Array ? decodePkts(input) : input;
}

/**
 * Parses a complete capability advertisement (see
 * {@link readCapabilityAdvertisement}) from packets or raw bytes.
 *
 * @throws {ProtocolError} `"bad-advertisement"`; {@link ProtocolRemoteError} for `ERR`.
 */
export function parseCapabilityAdvertisement(
  input: Uint8Array | readonly Pkt[],
): CapabilityAdvertisement {
  const pkts = toPkts(input);
  let i = 0;
  const line = (): string => {
    const pkt = pkts[i++];
    if (pkt?.type !== "data") {
      throw new ProtocolError(
        "bad-advertisement",
        `capability advertisement: expected a data line, got ${describe(pkt)}`,
      );
    }
    const text = pktText(pkt);
    rejectErrLine(text);
    return text;
  };
  let first = line();
  if (first.startsWith("# service=")) {
    if (pkts[i++]?.type !== "flush") {
      throw new ProtocolError("bad-advertisement", "expected a flush after the service line");
    }
    first = line();
  }
  if (first !== "version 2") {
    throw new ProtocolError(
      "bad-advertisement",
      `capability advertisement must start with "version 2", got "${first}"`,
    );
  }
  const capabilities: Capability[] = [];
  while (pkts[i]?.type === "data") capabilities.push(parseCapability(line()));
  if (pkts[i]?.type !== "flush" || i + 1 !== pkts.length) {
    throw new ProtocolError(
      "bad-advertisement",
      `capability advertisement must end with a single flush, got ${describe(pkts[i])}`,
    );
  }
  return { capabilities };
}

/** Encodes an advertisement the way `git upload-pack` does, final flush included. */
export function serializeCapabilityAdvertisement(adv: CapabilityAdvertisement): Uint8Array {
  return concat([
    textLine("version 2"),
    ...adv.capabilities.map((c) => textLine(formatCapability(c))),
    FLUSH_PKT,
  ]);
}

/** The value of capability `key` (`""` when present without a value), or `undefined`. */
export function capabilityValue(adv: CapabilityAdvertisement, key: string): string | undefined {
  const c = adv.capabilities.find((c) => c.key === key);
  return c === undefined ? undefined : c.value ?? "";
}

/** True if the `fetch` capability lists `feature` among its space-separated values. */
export function hasFetchFeature(adv: CapabilityAdvertisement, feature: string): boolean {
  const value = capabilityValue(adv, "fetch");
  return value !== undefined && value.split(" ").includes(feature);
}

/**
 * A copy of `adv` whose `fetch` capability also lists `feature`. Unchanged if
 * the feature is already there or there is no `fetch` capability.
 */
export function withFetchFeature(
  adv: CapabilityAdvertisement,
  feature: string,
): CapabilityAdvertisement {
  return {
    capabilities: adv.capabilities.map((c) => {
      if (c.key !== "fetch") return { ...c };
      const features = c.value ? c.value.split(" ") : [];
      if (features.includes(feature)) return { ...c };
      return { key: "fetch", value: [...features, feature].join(" ") };
    }),
  };
}

// ---------------------------------------------------------------------------
// Command requests

/** A protocol v2 command request, lines without trailing newlines. */
export interface CommandRequest {
  /** The command name, e.g. `"fetch"` or `"ls-refs"`. */
  command: string;
  /** Capability lines before the delimiter, e.g. `"agent=git/2.39.5"`, in their order. */
  capabilities: string[];
  /** Lines after the delimiter. */
  args: string[];
  /**
   * Where the `command=` line stood among the capability lines (git >= 2.40 sends some
   * capabilities first); absent when it came first, as git 2.39 sends it.
   */
  commandAt?: number;
}

/**
 * Reads one command request: a `command=<name>` line and capability lines in any order, optional
 * delimiter and argument lines, flush.
 *
 * @returns `null` when the stream ends cleanly before the request starts.
 * @throws {ProtocolError} `"bad-request"` for a missing or repeated `command=` line, a
 * second delimiter, or a request cut off before its flush.
 */
export async function readCommandRequest(reader: PktLineReader): Promise<CommandRequest | null> {
  const head = await reader.peek();
  if (head === null) return null;
  // Each packet becomes its text at once and is dropped: a request of a million lines keeps a
  // million short strings, not a million packets and views into the bytes they came in.
  const capabilities: string[] = [];
  let command: { command: string; at: number } | null = null;
  let pkt: Pkt | null;
  for (;;) {
    pkt = await reader.read();
    if (pkt === null || pkt.type !== "data") break;
    const line = pktText(pkt);
    const name = commandOf(line, command?.command);
    if (name === null) capabilities.push(line);
    else command = { command: name, at: capabilities.length };
  }
  if (!command) throw noCommand(head);
  const request: CommandRequest = { command: command.command, capabilities, args: [] };
  if (command.at > 0) request.commandAt = command.at;
  if (pkt?.type === "delim") {
    for (;;) {
      pkt = await reader.read();
      if (pkt === null || pkt.type !== "data") break;
      request.args.push(pktText(pkt));
    }
  }
  if (pkt === null) {
    throw new ProtocolError("bad-request", `request "${request.command}" ended before its flush`);
  }
  if (pkt.type !== "flush") {
    throw new ProtocolError(
      "bad-request",
      `unexpected ${pkt.type} packet in request "${request.command}"`,
    );
  }
  return request;
}

/**
 * The command a request names: its one `command=<name>` line among the data lines before the
 * first delimiter or flush (gitprotocol-v2 puts no order on that line and the capabilities).
 * `pkts` may stop at that delimiter or flush.
 *
 * @throws {ProtocolError} `"bad-request"` for no, an empty or a second `command=` line.
 */
export function requestCommand(pkts: readonly Pkt[]): { command: string; at: number } {
  let found: { command: string; at: number } | null = null;
  for (let i = 0; i < pkts.length && pkts[i].type === "data"; i++) {
    const name = commandOf(pktText(pkts[i]), found?.command);
    if (name !== null) found = { command: name, at: i };
  }
  if (!found) throw noCommand(pkts[0]);
  return found;
}

/**
 * The command a request line names, or `null` when it is not a `command=` line.
 *
 * @throws {ProtocolError} `"bad-request"` for an empty `command=` line, or a second one after
 * `found`.
 */
function commandOf(line: string, found: string | undefined): string | null {
  if (!line.startsWith("command=")) return null;
  const name = line.slice("command=".length);
  if (name === "") throw new ProtocolError("bad-request", `request has an empty "command=" line`);
  if (found !== undefined) {
    throw new ProtocolError("bad-request", `request names two commands, "${found}" and "${name}"`);
  }
  return name;
}

/** The error for a request with no `command=` line, naming how it starts. */
function noCommand(first: Pkt | undefined): ProtocolError {
  const got = first?.type === "data" ? `"${pktText(first)}"` : describe(first);
  return new ProtocolError(
    "bad-request",
    `request has no "command=<name>" line before its arguments (starts with ${got})`,
  );
}

/**
 * Parses one complete command request (see {@link readCommandRequest}) from
 * packets or raw bytes.
 *
 * @throws {ProtocolError} `"bad-request"` when malformed or followed by extra packets.
 */
export function parseCommandRequest(input: Uint8Array | readonly Pkt[]): CommandRequest {
  const pkts = toPkts(input);
  const { command, at } = requestCommand(pkts);
  const request: CommandRequest = { command, capabilities: [], args: [] };
  if (at > 0) request.commandAt = at;
  let target = request.capabilities;
  for (let i = 0; i < pkts.length; i++) {
    const pkt = pkts[i];
    if (i === at) continue;
    if (pkt.type === "data") {
      target.push(pktText(pkt));
    } else if (pkt.type === "delim" && target === request.capabilities) {
      target = request.args;
    } else if (pkt.type === "flush" && i === pkts.length - 1) {
      return request;
    } else {
      throw new ProtocolError(
        "bad-request",
        `unexpected ${pkt.type} packet in request "${request.command}"`,
      );
    }
  }
  throw new ProtocolError("bad-request", `request "${request.command}" ended before its flush`);
}

/** Commands whose request git always sends with a delimiter. */
const ALWAYS_DELIMITED = new Set(["fetch", "ls-refs", "object-info", "bundle-uri"]);

/** Argument keywords after which git 2.39 writes a newline in a `fetch` request. */
const FETCH_NEWLINE_ARGS = new Set(["want", "want-ref", "have", "done", "deepen-relative"]);

function argKeyword(arg: string): string {
  const space = arg.indexOf(" ");
  return space < 0 ? arg : arg.slice(0, space);
}

/** Whether git terminates this request line with a newline. */
function gitWritesNewline(command: string, part: "command" | "capability" | "arg", line: string) {
  if (command !== "ls-refs" && command !== "fetch") return false;
  if (part === "command") return command === "ls-refs";
  if (part === "capability") return false;
  return command === "ls-refs" || FETCH_NEWLINE_ARGS.has(argKeyword(line));
}

/**
 * Encodes a request the way git 2.39 does, flush included: the delimiter is
 * written when there are arguments and always for fetch/ls-refs; newlines
 * follow git's own (inconsistent) habits per line. The `command=` line goes
 * where `commandAt` says (first by default).
 */
export function serializeCommandRequest(req: CommandRequest): Uint8Array {
  // Written into one buffer sized up front, with no packet object per line: a request can hold a
  // million `want` lines.
  const delimited = req.args.length > 0 || ALWAYS_DELIMITED.has(req.command);
  const newline = (part: "command" | "capability" | "arg", text: string) =>
    gitWritesNewline(req.command, part, text) ? 1 : 0;
  const size = (part: "command" | "capability" | "arg", text: string) => {
    const payload = utf8Length(text) + newline(part, text);
    if (payload > MAX_PKT_DATA) {
      throw new PktLineError(
        "too-long",
        `pkt-line payload of ${payload} bytes exceeds the maximum of ${MAX_PKT_DATA}`,
      );
    }
    return 4 + payload;
  };
  const command = `command=${req.command}`;
  let total = size("command", command) + (delimited ? DELIM_PKT.length : 0) + FLUSH_PKT.length;
  for (const c of req.capabilities) total += size("capability", c);
  for (const a of req.args) total += size("arg", a);
  const out = new Uint8Array(total);
  let at = 0;
  const write = (part: "command" | "capability" | "arg", text: string) => {
    const start = at;
    at += 4 + encoder.encodeInto(text, out.subarray(at + 4)).written;
    if (newline(part, text)) out[at++] = 0x0a;
    const length = at - start;
    for (let k = 0; k < 4; k++) out[start + k] = HEX_DIGITS[(length >> (12 - 4 * k)) & 0xf];
  };
  const commandAt = Math.min(req.commandAt ?? 0, req.capabilities.length);
  req.capabilities.forEach((c, i) => {
    if (i === commandAt) write("command", command);
    write("capability", c);
  });
  if (commandAt === req.capabilities.length) write("command", command);
  if (delimited) {
    out.set(DELIM_PKT, at);
    at += DELIM_PKT.length;
  }
  for (const a of req.args) write("arg", a);
  out.set(FLUSH_PKT, at);
  return out;
}

const HEX_DIGITS = encoder.encode("0123456789abcdef");

/** Bytes of `text` in UTF-8, without encoding it when it is ASCII. */
function utf8Length(text: string): number {
  // deno-lint-ignore no-control-regex
  return /^[\x00-\x7f]*$/.test(text) ? text.length : encoder.encode(text).length;
}

// ---------------------------------------------------------------------------
// fetch arguments

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

// ---------------------------------------------------------------------------
// ls-refs

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

// ---------------------------------------------------------------------------
// fetch response

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

/** One line of a `packfile-uris` section. */
export interface PackfileUri {
  /** The pack's trailer checksum: 40 hex digits (SHA-1), or 64 in a SHA-256 repository. */
  hash: string;
  uri: string;
}

const PACK_HASH_RE = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * Parses `<pack hash> <uri>` (40 or 64 hex digits).
 *
 * @throws {ProtocolError} `"bad-packfile-uri"` when malformed.
 */
export function parsePackfileUriLine(line: string): PackfileUri {
  const space = line.indexOf(" ");
  const hash = space < 0 ? line : line.slice(0, space);
  const uri = space < 0 ? "" : line.slice(space + 1);
  if (!PACK_HASH_RE.test(hash) || uri === "") {
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
  if (!PACK_HASH_RE.test(hash)) {
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
