/**
 * What the edge does with a protocol-v2 `fetch`: a pure decision on plain values (the parsed
 * request, the snapshot in force and its health, what the origin advertised, the credential memo
 * and whether the response cache is on). `handleUploadPack` gathers these, calls
 * {@link planFetch} and does the I/O the plan says; {@link rewriteDecision} (eligibility.ts) is
 * the part that decides whether the snapshot's packs may go by URI at all.
 */
import { type CommandRequest, withoutArgLines } from "../../git/command_request.ts";
import type { FetchArgs } from "../../git/fetch_request.ts";
import type { ScheduleBasis } from "../core/deps.ts";
import { type Manifest, manifestPacks } from "../core/manifest.ts";
import { type FetchClass, rewriteDecision, sameObjectFormat } from "./eligibility.ts";
import { uncacheable } from "../core/response_cache.ts";
import { NO_SNAPSHOT, type SnapshotLookup } from "../snapshots/current_snapshot.ts";

export { NO_SNAPSHOT, type SnapshotLookup };

/** Everything the decision depends on. */
export interface FetchInputs {
  /** The client's command request (`command=fetch`). */
  req: CommandRequest;
  /** Its arguments, parsed. */
  args: FetchArgs;
  /** What the request is (eligibility.ts `classifyFetch`), decided once. */
  fetch: FetchClass;
  /** The snapshot, looked up when {@link wantsSnapshot} says so, else {@link NO_SNAPSHOT}. */
  snapshot: SnapshotLookup;
  /** The repository's origin advertised `packfile-uris` itself (it may then see the argument). */
  originAdvertisesUris: boolean;
  /** The origin accepted this request's credential for this repository within the memo's TTL. */
  recentlyAuthorised: boolean;
  /** The response cache is on (a byte budget above zero). */
  responseCacheOn: boolean;
  /** Plain clones may be streamed from the snapshot (`snapshotPlainClones`). */
  snapshotPlainClones: boolean;
  /**
   * The edge keeps a git mirror of the repository (the Deno server with `git`; src/proxy/mirror),
   * and what the origin's v2 advertisement said about `filter` (the mirror accepts no argument
   * the origin would refuse). Absent: no mirror.
   */
  mirror?: { originAdvertisesFilter: boolean };
}

/** What the edge does when the mirror cannot answer: what it would do with no mirror. */
export type FallbackPlan = Extract<FetchPlan, { action: "response-cache" | "forward" }>;

/** What to do; `noUris` and `build` go with every action. */
export type FetchPlan =
  & {
    /**
     * Why the fetch gets no packfile URIs, or null when it gets them (counted in
     * `gitedge_fetch_passthrough_total`, logged as action `passthrough`: names users see, kept).
     */
    noUris: string | null;
    /**
     * Start a snapshot build (with the client's credentials) once the origin has served this
     * request, or null for none.
     */
    build: ScheduleBasis | null;
  }
  & (
    /** The edge answers alone: the snapshot's packs by URI and an empty pack; no origin call. */
    | { action: "answer-from-snapshot"; manifest: Manifest }
    /**
     * Send the origin `originArgs` (the snapshot's tips as haves, no thin pack, `done`), then
     * put the snapshot's packs in a `packfile-uris` section before its pack.
     */
    | { action: "rewrite"; manifest: Manifest; originArgs: FetchArgs }
    /**
     * The edge answers alone with one pack streamed from the snapshot's packs (a plain clone of
     * exactly the snapshot's tips: streamed_fetch.ts); no origin call.
     */
    | { action: "stream-snapshot"; manifest: Manifest }
    /** Through the response cache, asking the origin (on a miss) `originReq`/`originArgs`. */
    | { action: "response-cache"; originReq: CommandRequest; originArgs: FetchArgs }
    /** Forward the request's bytes as sent, less its `packfile-uris` line if `stripUris`. */
    | { action: "forward"; stripUris: boolean }
    /**
     * Answer with git's `upload-pack` on the edge's mirror (mirror_fetch.ts) once it holds every
     * want (an incremental fetch from the origin brings it current first, shared by concurrent
     * requests). `askOrigin`: the origin has not accepted this credential within `--auth-ttl`,
     * so it is asked first (a probe fetch that costs it no pack: origin/fetch_probe.ts), and a
     * refusal is the client's answer.
     * Whenever the mirror cannot answer, `fallback` is carried out instead.
     */
    | { action: "answer-from-mirror"; askOrigin: boolean; fallback: FallbackPlan }
  );

/**
 * Whether the decision needs the snapshot: only a request that may get URIs does, or, with
 * `plainClones`, a plain full clone that may be streamed from it (so other fetches cost no store
 * lookups).
 */
export function wantsSnapshot(fetch: FetchClass, plainClones = false): boolean {
  return fetch.uriIneligible === null || (plainClones && fetch.plainClone);
}

/** The plan for a fetch. */
export function planFetch(input: FetchInputs): FetchPlan {
  const { req, args, fetch, snapshot } = input;
  let noUris = fetch.uriIneligible;
  let inject: Manifest | null = null;
  let build: ScheduleBasis | null = null;
  if (noUris === null) {
    const { manifest, missingPack } = snapshot;
    const view = manifest &&
      { tips: manifest.tips, packs: manifestPacks(manifest).length, missingPack };
    const decision = rewriteDecision(fetch, args.wants, view);
    noUris = decision.reason;
    if (noUris === null && manifest) inject = manifest;
    if (decision.refresh) build = { builtAt: manifest?.builtAt ?? null, rebuild: missingPack };
  }
  // A plain full clone (streamed from the snapshot once there is one) starts the first build, and
  // a refresh once the origin has moved past the snapshot, as a clone asking for URIs does.
  if (input.snapshotPlainClones && fetch.plainClone) {
    const { manifest, missingPack } = snapshot;
    const tips = new Set(Object.values(manifest?.tips ?? {}));
    if (!manifest || missingPack || args.wants.some((w) => !tips.has(w))) {
      build = { builtAt: manifest?.builtAt ?? null, rebuild: missingPack };
    }
  }
  if (inject && answerable(fetch, args, inject) && input.recentlyAuthorised) {
    return { noUris, build: null, action: "answer-from-snapshot", manifest: inject };
  }
  if (inject) {
    return {
      noUris,
      build,
      action: "rewrite",
      manifest: inject,
      originArgs: rewritten(args, inject),
    };
  }
  // A plain clone of exactly the snapshot, for a credential the origin accepted just now (its
  // `ls-refs`): one pack streamed from the snapshot's packs.
  const streamFrom = snapshot.missingPack ? null : snapshot.manifest;
  if (
    input.snapshotPlainClones && input.recentlyAuthorised && streamFrom &&
    fetch.plainClone && streamable(fetch, args, streamFrom)
  ) {
    return { noUris: null, build, action: "stream-snapshot", manifest: streamFrom };
  }
  // The origin never sees a `packfile-uris` argument it did not advertise itself (the edge added
  // it to the advertisement; git >= 2.45 dies on it).
  const keepUris = input.originAdvertisesUris;
  const originArgs = keepUris ? args : { ...args, packfileUris: null };
  let fallback: FallbackPlan;
  if (input.responseCacheOn && uncacheable(originArgs) === null) {
    const originReq = keepUris ? req : { ...req, args: withoutArgLines(req.args, "packfile-uris") };
    fallback = { noUris, build, action: "response-cache", originReq, originArgs };
  } else {
    fallback = { noUris, build, action: "forward", stripUris: !keepUris };
  }
  if (input.mirror && mirrorable(req, args, input.mirror.originAdvertisesFilter)) {
    return {
      noUris,
      build,
      action: "answer-from-mirror",
      askOrigin: !input.recentlyAuthorised,
      fallback,
    };
  }
  return fallback;
}

/**
 * Whether the mirror's upload-pack may answer: a fetch with wants (object ids: a `want-ref` or a
 * `deepen-not` names the origin's ref of the moment, which only the origin knows for sure), SHA-1 (mirrors are), no
 * argument the edge does not know, no `filter` the origin did not advertise and no `sideband-all`
 * (git's upload-pack refuses arguments it did not advertise, and the mirror advertises what the
 * origin does). The request's `packfile-uris` line is dropped (the mirror hands out no URIs).
 */
function mirrorable(req: CommandRequest, args: FetchArgs, originFilters: boolean): boolean {
  if (args.wants.length === 0 || args.wantRefs.length > 0 || args.other.length > 0) return false;
  // `deepen-not` names refs too, which upload-pack would resolve in the mirror's refs of its
  // last update.
  if (args.deepenNot.length > 0) return false;
  if (req.capabilities.some((c) => c.startsWith("object-format=") && c !== "object-format=sha1")) {
    return false;
  }
  if (args.filter !== null && !originFilters) return false;
  return !args.sidebandAll;
}

/**
 * The arguments the origin gets for a rewritten fetch: the snapshot's tips as haves, so it sends
 * only the remainder; never thin (the inline pack is indexed before the URI packs and must not
 * depend on them); no `packfile-uris`; `done`, since the edge cannot negotiate for the client.
 */
function rewritten(args: FetchArgs, manifest: Manifest): FetchArgs {
  return {
    ...args,
    haves: [...new Set(Object.values(manifest.tips))],
    thinPack: false,
    packfileUris: null,
    done: true,
  };
}

/**
 * Whether the edge can answer a fetch eligible for URIs (so no `want-ref`) alone: every want is a
 * snapshot tip (so the snapshot packs hold everything it asks for and the origin's remainder would
 * be empty), the request is complete (`done`, no argument the edge does not know), in the
 * snapshot's object format.
 */
function answerable(fetch: FetchClass, args: FetchArgs, manifest: Manifest): boolean {
  if (!fetch.complete || !sameObjectFormat(fetch, manifest)) return false;
  const tips = new Set(Object.values(manifest.tips));
  return args.wants.every((w) => tips.has(w));
}

/**
 * Whether the snapshot `manifest` is exactly what a plain clone asks for: its wants are the
 * snapshot's tips, all of them and nothing else (so the snapshot holds what a direct clone gets,
 * tags included: `include-tag` adds nothing a tip does not reach; an origin that moved since the
 * build shows as different wants), in the snapshot's object format. Only a snapshot of one layer:
 * a refresh layer may hold again objects of an earlier one (the origin's pack for `have <old
 * tips>` omits only what those tips' trees hold, so a reverted file comes again), and git's
 * `index-pack --strict` (`transfer.fsckObjects`) refuses a pack holding an object twice. The
 * parts of one layer are disjoint (pack_split.ts).
 */
function streamable(fetch: FetchClass, args: FetchArgs, manifest: Manifest): boolean {
  if (!sameObjectFormat(fetch, manifest)) return false;
  if (manifest.layers.length !== 1 || manifest.layers[0].length === 0) return false;
  const tips = new Set(Object.values(manifest.tips));
  const wants = new Set(args.wants);
  return wants.size === tips.size && [...wants].every((w) => tips.has(w));
}
