/**
 * Protocol v2 command requests (see gitprotocol-v2): a `command=<name>` line and capability lines,
 * an optional delimiter and argument lines, flush.
 *
 * Lines are handled without their trailing `"\n"`. The serializer adds newlines exactly where
 * Git 2.39 itself writes them, so a request produced by git round-trips byte for byte.
 *
 * @module
 */

import { ProtocolError } from "./errors.ts";
import {
  DELIM_PKT,
  describePkt,
  FLUSH_PKT,
  MAX_PKT_DATA,
  type Pkt,
  PktLineError,
  type PktLineReader,
  pktText,
  toPkts,
} from "./pktline.ts";

const encoder = new TextEncoder();

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
 * @throws {ProtocolError} `"bad-request"` for a missing or repeated `command=` line (also among
 * the arguments), a second delimiter, or a request cut off before its flush.
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
      request.args.push(argumentLine(pktText(pkt)));
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

/**
 * `line` as an argument. No command takes a `command=` argument (git's upload-pack dies on one),
 * so one among the arguments is a second command.
 *
 * @throws {ProtocolError} `"bad-request"` for a `command=` line.
 */
function argumentLine(line: string): string {
  if (line.startsWith("command=")) {
    throw new ProtocolError(
      "bad-request",
      `request names a second command ("${line.trimEnd()}") among its arguments`,
    );
  }
  return line;
}

/** The error for a request with no `command=` line, naming how it starts. */
function noCommand(first: Pkt | undefined): ProtocolError {
  const got = first?.type === "data" ? `"${pktText(first)}"` : describePkt(first);
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
      const line = pktText(pkt);
      target.push(target === request.args ? argumentLine(line) : line);
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

/** The keyword of an argument line: the text before its first space. */
export function argKeyword(arg: string): string {
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

/** Whether argument line `line` is the argument `keyword` (alone, or with a value after a space). */
export function isArg(line: string, keyword: string): boolean {
  return line === keyword || line.startsWith(`${keyword} `);
}

/** Argument lines less those of argument `keyword` (request_body.ts `withoutArg`: as bytes). */
export function withoutArgLines(args: readonly string[], keyword: string): string[] {
  return args.filter((line) => !isArg(line, keyword));
}
