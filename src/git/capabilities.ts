/**
 * The protocol v2 capability advertisement (see gitprotocol-v2): `version 2`, one capability per
 * line, flush; with helpers to read and add `fetch` features.
 *
 * Lines are handled without their trailing `"\n"`; the serializer writes them as
 * `git upload-pack` does, so an advertisement from git round-trips byte for byte.
 *
 * @module
 */

import { ProtocolError, rejectErrLine } from "./errors.ts";
import {
  concat,
  describePkt,
  encodePkt,
  FLUSH_PKT,
  type Pkt,
  type PktLineReader,
  pktText,
  toPkts,
} from "./pktline.ts";

function textLine(line: string): Uint8Array {
  return encodePkt(line + "\n");
}

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
        `capability advertisement: expected a data line, got ${describePkt(pkt)}`,
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
      `capability advertisement must end with a single flush, got ${describePkt(pkts[i])}`,
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
