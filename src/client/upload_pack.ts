/**
 * A protocol v2 `git-upload-pack` session over smart HTTP: the capability advertisement, then
 * `ls-refs` and `fetch` requests. Wire parsing and encoding come from `src/git/`.
 */
import { PktLineReader, pktText } from "../git/pktline.ts";
import {
  type CapabilityAdvertisement,
  capabilityValue,
  hasFetchFeature,
  readCapabilityAdvertisement,
} from "../git/capabilities.ts";
import { serializeCommandRequest } from "../git/command_request.ts";
import { ProtocolError } from "../git/errors.ts";
import { emptyFetchArgs, serializeFetchArgs } from "../git/fetch_request.ts";
import { readFetchResponse } from "../git/fetch_response.ts";
import { type LsRefsLine, parseLsRefsLine, serializeLsRefsArgs } from "../git/ls_refs.ts";
import { type PackfileUri, parsePackfileUriLine } from "../git/packfile_uris.ts";
import { settleAll } from "./pool.ts";
import type { SmartHttpClient } from "./smart_http.ts";

/** A ref as `ls-refs` reports it (`oid` null for an unborn HEAD). */
export type RemoteRef = LsRefsLine;

/** Protocols we accept packfile URIs for, in preference order. */
export const URI_PROTOCOLS = ["https", "http"];

/** What git (2.31 and later) advertises for a SHA-1 repository, as far as `ls-refs` cares. */
const ASSUMED_CAPABILITIES = [
  { key: "ls-refs", value: "unborn" },
  { key: "object-format", value: "sha1" },
];

/** Options for {@link UploadPackSession.fetch}. */
export interface FetchRequestOptions {
  /** Ask for `packfile-uris` (only when the server lists the feature). */
  packfileUris: boolean;
  /** Let the server send progress messages (delivered to `onRemoteProgress`). */
  progress: boolean;
  onRemoteProgress?: (message: string) => void;
  /** `deepen <n>`: a shallow fetch of that many commits from each want. */
  depth?: number;
  /** `filter <spec>`: a partial fetch (only when the server lists the feature). */
  filter?: string;
  /** `include-tag`: annotated tags pointing into the pack come along. */
  includeTag?: boolean;
  /** Objects we already have (from a `--reference` repository); `done` is sent with them. */
  haves?: string[];
}

/** The two things a clone's fetch response carries. */
export interface FetchResult {
  /** Packs to download separately (empty without packfile-uris). */
  uris: PackfileUri[];
  /** The inline pack, demultiplexed from side-band 1; consume or cancel it. */
  pack: ReadableStream<Uint8Array>;
  /** Commits the server made shallow (`shallow-info`'s `shallow` lines). */
  shallow: string[];
}

/** One repository's upload-pack service, after reading its capability advertisement. */
export class UploadPackSession {
  private constructor(
    readonly http: SmartHttpClient,
    readonly advertisement: CapabilityAdvertisement,
  ) {}

  /** Reads the capability advertisement (protocol v2 only). */
  static async connect(http: SmartHttpClient): Promise<UploadPackSession> {
    const body = await http.advertisement();
    const reader = new PktLineReader(body);
    try {
      return new UploadPackSession(http, await readCapabilityAdvertisement(reader));
    } finally {
      await reader.cancel();
    }
  }

  /** Whether `fetch` can answer with packfile URIs. */
  get supportsPackfileUris(): boolean {
    return hasFetchFeature(this.advertisement, "packfile-uris");
  }

  /** Whether `fetch` takes a `filter` (partial clone). */
  get supportsFilter(): boolean {
    return hasFetchFeature(this.advertisement, "filter");
  }

  /** The repository's object format (`sha1` unless advertised otherwise). */
  get objectFormat(): string {
    return capabilityValue(this.advertisement, "object-format") || "sha1";
  }

  /**
   * Reads the capability advertisement with an `ls-refs` for `prefixes` already on its way: one
   * round trip sooner than {@link connect} then {@link lsRefs}. The early request assumes what
   * git advertises for a SHA-1 repository (protocol v2, `ls-refs=unborn`, `object-format=sha1`),
   * and its answer is used only when the advertisement makes {@link lsRefs} send that same request,
   * byte for byte, to the same URL; otherwise, or when it failed (a 401 included: only the
   * advertisement asks for credentials), it is dropped and `ls-refs` is sent again. A server that
   * does not speak v2 fails as with {@link connect}. `refs` settles once the refs are known.
   */
  static async connectListingRefs(
    http: SmartHttpClient,
    prefixes: string[],
  ): Promise<{ session: UploadPackSession; refs: Promise<RemoteRef[]> }> {
    const base = http.baseUrl;
    const assumed = new UploadPackSession(http, { capabilities: ASSUMED_CAPABILITIES });
    const earlyRequest = assumed.#lsRefsRequest(prefixes);
    const early = http.command(earlyRequest, { renew: false }).then(readLsRefs).catch(() => null);
    let session: UploadPackSession;
    try {
      session = await UploadPackSession.connect(http);
    } catch (error) {
      await early;
      throw error;
    }
    const refs = (async () => {
      const same = http.baseUrl === base &&
        capabilityValue(session.advertisement, "ls-refs") !== undefined &&
        sameBytes(session.#lsRefsRequest(prefixes), earlyRequest);
      if (!same) {
        // Asked again at once; the early answer is still read to its end (and dropped).
        return (await settleAll([early, session.lsRefs(prefixes)] as const))[1];
      }
      return await early ?? await session.lsRefs(prefixes);
    })();
    return { session, refs };
  }

  /** Lists refs under `prefixes` with symref targets and peeled tags (and unborn HEAD). */
  async lsRefs(prefixes: string[]): Promise<RemoteRef[]> {
    return readLsRefs(await this.http.command(this.#lsRefsRequest(prefixes)));
  }

  #lsRefsRequest(prefixes: string[]): Uint8Array<ArrayBuffer> {
    const lsRefs = capabilityValue(this.advertisement, "ls-refs");
    if (lsRefs === undefined) throw new ProtocolError("no-ls-refs", "server lacks ls-refs");
    const args = serializeLsRefsArgs({
      symrefs: true,
      peel: true,
      unborn: lsRefs.split(" ").includes("unborn"),
      refPrefixes: prefixes,
      other: [],
    });
    return this.#request("ls-refs", args);
  }

  /** Asks for `wants` (with `haves`, if any, then `done`) and returns the URIs and the inline pack. */
  async fetch(wants: string[], options: FetchRequestOptions): Promise<FetchResult> {
    if (capabilityValue(this.advertisement, "fetch") === undefined) {
      throw new ProtocolError("no-fetch", "server lacks fetch");
    }
    const args = emptyFetchArgs();
    args.wants = wants;
    args.haves = options.haves ?? [];
    args.includeTag = options.includeTag ?? false;
    if (options.depth !== undefined) {
      if (!hasFetchFeature(this.advertisement, "shallow")) {
        throw new ProtocolError("no-shallow", "server does not support shallow clients");
      }
      args.deepen = options.depth;
    }
    if (options.filter !== undefined && hasFetchFeature(this.advertisement, "filter")) {
      args.filter = options.filter;
    }
    args.thinPack = true;
    args.ofsDelta = true;
    args.noProgress = !options.progress;
    args.done = true;
    // git's upload-pack only honours packfile-uris together with sideband-all.
    args.sidebandAll = hasFetchFeature(this.advertisement, "sideband-all");
    if (options.packfileUris && this.supportsPackfileUris) args.packfileUris = URI_PROTOCOLS;
    const body = await this.http.command(this.#request("fetch", serializeFetchArgs(args)));
    const reader = new PktLineReader(body);
    const uris: PackfileUri[] = [];
    const shallow: string[] = [];
    const parts = readFetchResponse(reader, {
      sidebandAll: args.sidebandAll,
      onProgress: options.onRemoteProgress,
    });
    try {
      for await (const part of parts) {
        if (part.section === "packfile") {
          // The pack ends the response: once it has been read, release the response body.
          const release = new TransformStream<Uint8Array, Uint8Array>({
            flush: () => reader.cancel(),
          });
          return { uris, shallow, pack: part.pack.pipeThrough(release) };
        }
        if (part.section === "packfile-uris") uris.push(...part.lines.map(parsePackfileUriLine));
        if (part.section === "shallow-info") {
          for (const line of part.lines) {
            const [kind, oid] = line.split(" ");
            if (kind === "shallow" && oid) shallow.push(oid);
          }
        }
      }
    } catch (error) {
      await reader.cancel().catch(() => {});
      throw error;
    }
    await reader.cancel();
    throw new ProtocolError("bad-response", "fetch response carried no packfile");
  }

  #request(command: string, args: string[]): Uint8Array<ArrayBuffer> {
    const capabilities = ["agent=gitedge/1"];
    const format = capabilityValue(this.advertisement, "object-format");
    if (format !== undefined) capabilities.push(`object-format=${format}`);
    return serializeCommandRequest({ command, capabilities, args }) as Uint8Array<ArrayBuffer>;
  }
}

/** Reads an `ls-refs` answer up to its flush and releases the body. */
async function readLsRefs(body: ReadableStream<Uint8Array>): Promise<RemoteRef[]> {
  const reader = new PktLineReader(body);
  try {
    const refs: RemoteRef[] = [];
    for (;;) {
      const pkt = await reader.read();
      if (pkt?.type === "flush") return refs;
      if (pkt?.type !== "data") {
        throw new ProtocolError("bad-ls-refs", `ls-refs ended with ${pkt?.type ?? "EOF"}`);
      }
      refs.push(parseLsRefsLine(pktText(pkt)));
    }
  } finally {
    await reader.cancel();
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && a.every((byte, i) => byte === b[i]);
}
