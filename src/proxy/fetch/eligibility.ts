/**
 * Which protocol-v2 fetches get the snapshot's packs by URI: a pure decision on the request's
 * arguments and the snapshot in force, shared by the rewrite and anything that answers fetches
 * from the snapshot.
 *
 * The rule that keeps a clone through the edge equal to a direct one: the snapshot must hold
 * nothing the origin would not have sent. Its packs hold what its tips reach, so every tip must be
 * among the wants (see {@link coversSnapshot} for an origin that moved since the build). Extra
 * objects are not harmless: git follows tags to objects it has, so a `--single-branch` clone
 * handed the whole snapshot ends up with tags a direct clone lacks, and `--no-tags` or one-commit
 * fetches get objects they never asked for.
 */
import type { CommandRequest } from "../../git/command_request.ts";
import type { FetchArgs } from "../../git/fetch_request.ts";

/** The snapshot as the decision sees it. */
export interface SnapshotView {
  /** Ref name to object id at build time (branches and tags). */
  tips: Record<string, string>;
  /** How many packs it names. */
  packs: number;
  /** A pack it names is missing from the store (or has the wrong size). */
  missingPack: boolean;
}

/** The outcome: inject URIs (`reason` null) or pass through, and whether to build or refresh. */
export interface RewriteDecision {
  /** Why the fetch passes through unchanged, or null when it gets URIs. */
  reason: string | null;
  /** No snapshot, a broken one, or the fetch wants objects the snapshot lacks. */
  refresh: boolean;
}

/**
 * What a fetch request is, decided once from its arguments and capabilities: everything the plan
 * needs to know about the request itself (the snapshot comes apart).
 */
export interface FetchClass {
  /** Why the request alone rules out the snapshot's packs by URI, or null when it may get them. */
  uriIneligible: string | null;
  /**
   * A plain full clone: no URIs it could get from the edge (those go by
   * {@link FetchClass.uriIneligible}), no haves, not shallow or partial, no `want-ref`, and what
   * {@link FetchClass.complete} and `ofs-delta` say (snapshot packs hold OFS_DELTA entries, which a
   * client that did not ask for them cannot read).
   */
  plainClone: boolean;
  /** The client sent `done` (no negotiation round) and no argument the edge does not know. */
  complete: boolean;
  /** The object format the client asked for (`object-format=` capability), `sha1` by default. */
  objectFormat: string;
}

/**
 * The class of a fetch `req` with arguments `args`, for an edge whose public URL has `scheme`:
 * URIs need the client to have asked for `scheme`, and a plain full fetch (no haves, not shallow,
 * not partial).
 */
export function classifyFetch(req: CommandRequest, args: FetchArgs, scheme: string): FetchClass {
  const asksUris = args.packfileUris?.includes(scheme) ?? false;
  const shape = notFull(args);
  const complete = args.done && args.other.length === 0;
  return {
    uriIneligible: asksUris ? shape : "client did not ask for packfile-uris",
    plainClone: !asksUris && shape === null && complete && args.ofsDelta,
    complete,
    objectFormat: req.capabilities.find((c) => c.startsWith("object-format="))?.slice(14) ??
      "sha1",
  };
}

/** Why `args` is not a plain full fetch of some wants, or null when it is. */
function notFull(args: FetchArgs): string | null {
  if (args.haves.length > 0) return "incremental fetch";
  if (args.shallow.length || args.deepen !== null || args.deepenSince !== null) return "shallow";
  if (args.deepenNot.length) return "shallow";
  if (args.filter !== null) return "partial clone";
  if (args.waitForDone) return "wait-for-done";
  if (args.wants.length === 0) return "no wants";
  if (args.wantRefs.length > 0) return "want-ref";
  return null;
}

/** Whether the snapshot `manifest` is in the object format the fetch of class `fetch` asks for. */
export function sameObjectFormat(fetch: FetchClass, manifest: { objectFormat?: string }): boolean {
  return fetch.objectFormat === (manifest.objectFormat ?? "sha1");
}

/** The decision for a fetch of class `fetch` wanting `wants`, and the snapshot (or null). */
export function rewriteDecision(
  fetch: FetchClass,
  wants: readonly string[],
  snapshot: SnapshotView | null,
): RewriteDecision {
  if (fetch.uriIneligible !== null) return { reason: fetch.uriIneligible, refresh: false };
  const tips = new Set(Object.values(snapshot?.tips ?? {}));
  const refresh = snapshot === null || snapshot.missingPack || wants.some((w) => !tips.has(w));
  let reason: string | null = null;
  if (snapshot === null) reason = "no snapshot";
  else if (snapshot.missingPack) reason = "snapshot pack missing";
  else if (snapshot.packs === 0) reason = "empty snapshot";
  else if (!coversSnapshot(wants, snapshot.tips)) reason = "wants part of the snapshot";
  return { reason, refresh };
}

/**
 * Whether a fetch of `wants` asks for everything the snapshot with `tips` holds. Exactly so when
 * every tip is wanted. When the origin has moved since the build (wants the snapshot lacks), a
 * branch tip may go unwanted because its branch moved on: that is allowed for at most as many
 * tips as there are such new wants, and never for a tag (tags follow objects a client has).
 * A single-branch, `--no-tags` or one-commit fetch leaves more tips unwanted than it brings new
 * wants, so it passes through.
 */
export function coversSnapshot(wants: readonly string[], tips: Record<string, string>): boolean {
  const wanted = new Set(wants);
  const snapshotOids = new Set(Object.values(tips));
  const unwanted = Object.entries(tips).filter(([, oid]) => !wanted.has(oid));
  if (unwanted.length === 0) return true;
  if (unwanted.some(([name]) => !name.startsWith("refs/heads/"))) return false;
  const newWants = new Set(wants.filter((w) => !snapshotOids.has(w)));
  return new Set(unwanted.map(([, oid]) => oid)).size <= newWants.size;
}
