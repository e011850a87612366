/**
 * `gitedge clone` as a function: protocol v2 `ls-refs` and `fetch` over smart HTTP, the inline
 * pack streamed into `git index-pack --fix-thin`, announced packfile URIs downloaded in parallel
 * with {@link fetchPackfiles}, a connectivity check, then refs, HEAD, the `origin` remote and the
 * checkout written the way `git clone` writes them. A failed clone removes what it created.
 */
import { type CredentialHelper, CredentialManager, GitCredentialHelper } from "./credentials.ts";
import { type ClonePlan, planClone } from "./checkout.ts";
import { defaultDirectory, prepareTarget, removeTarget } from "./clone_target.ts";
import { fetchPackfiles } from "./fetch_packfiles.ts";
import { settleAll } from "./pool.ts";
import { runGit } from "./git_command.ts";
import { indexInlinePack } from "./inline_pack.ts";
import type { PackfileUri } from "../git/packfile_uris.ts";
import type { PackfileResult, SpoolMode } from "./packfile_download.ts";
import type { ProgressEvent } from "./progress.ts";
import type { ObjectCounts } from "./index_progress.ts";
import { SmartHttpClient } from "./smart_http.ts";
import { checkConnectivity } from "./connectivity.ts";
import {
  addReferences,
  checkOut,
  detachHead,
  prepareRepository,
  presentObjects,
  updateSubmodules,
  writeConfig,
  writeRefs,
  writeShallow,
} from "./repo_setup.ts";
import type { RemoteRef } from "./upload_pack.ts";
import { UploadPackSession } from "./upload_pack.ts";

export { defaultDirectory } from "./clone_target.ts";

/**
 * Where a clone reports progress (the CLI's `ProgressView` implements it).
 *
 * @example Progress as log lines
 * ```ts
 * const progress: CloneProgress = {
 *   phase: (name) => console.error(`phase ${name}`),
 *   inline: (bytes) => console.error(`inline pack: ${bytes} bytes`),
 *   packEvent: (event) => {
 *     if (event.type === "done") console.error(`pack ${event.hash}: ${event.seconds} s`);
 *   },
 * };
 * await clone({ url: "https://edge.example/x/y.git", progress });
 * ```
 */
export interface CloneProgress {
  phase(name: string): void;
  /** Bytes of the inline pack received so far. */
  inline(bytes: number): void;
  packEvent(event: ProgressEvent): void;
  /** Object counts of one index-pack (`key`: "inline" or a pack's hash) as it goes. */
  objects?(key: string, counts: ObjectCounts): void;
  /** A progress message from the server (only when `serverProgress` is on). */
  remote?(message: string): void;
}

/**
 * Options for {@link clone}.
 *
 * @example A shallow clone of one branch
 * ```ts
 * const options: CloneOptions = {
 *   url: "https://edge.example/x/y.git",
 *   branch: "main",
 *   depth: 1,
 *   authorization: "Bearer <token>",
 * };
 * ```
 */
export interface CloneOptions {
  /** `http(s)://[user:password@]host/path` of the repository. */
  url: string;
  /** Target directory; defaults to the URL's last path segment (like git). */
  directory?: string;
  /** Parallel packfile-URI downloads (0 = auto). */
  jobs?: number;
  bare?: boolean;
  /** Branch (or tag, detached) to check out instead of the remote HEAD. */
  branch?: string;
  /** A full `Authorization` header value (the CLI passes `GITEDGE_AUTHORIZATION`). */
  authorization?: string;
  progress?: CloneProgress;
  /** Ask for server progress messages (the CLI does on a terminal). */
  serverProgress?: boolean;
  fetch?: typeof fetch;
  credentialHelper?: CredentialHelper;
  signal?: AbortSignal;
  /** Take the edge's `.idx` of each URI pack where it has one, checked, instead of index-pack. */
  trustEdgeIndex?: boolean;
  /** Where URI packs go while they download (see {@link SpoolMode}; default "auto"). */
  spool?: SpoolMode;
  /** `--depth`: a shallow clone of that many commits (implies `singleBranch` unless false). */
  depth?: number;
  /** `--single-branch` (true) or `--no-single-branch` (false); default: true with `depth`. */
  singleBranch?: boolean;
  /** `--no-tags`. */
  noTags?: boolean;
  /** `--revision`: one commit (ref name or object id), detached, no refs (git 2.49+). */
  revision?: string;
  /** `--no-checkout`. */
  noCheckout?: boolean;
  /**
   * `--filter`: a partial clone (the remote becomes a promisor; git fetches the rest lazily). A
   * server without filters gets a full clone, no promisor, and `onWarning` hears of it, as git.
   */
  filter?: string;
  /** Warnings git would print (`filtering not recognized by server, ignoring`); never thrown. */
  onWarning?: (message: string) => void;
  /** `-c key=value`, written to the new repository's config first, in order. */
  config?: [string, string][];
  /** `--recurse-submodules`: git initialises and clones the submodules after the checkout. */
  recurseSubmodules?: boolean;
  /** `--reference`: local repositories to borrow objects from (alternates); only the rest comes. */
  reference?: string[];
}

/**
 * What a clone transferred.
 *
 * @example Where a clone's time went
 * ```ts
 * const summary: CloneSummary = await clone({ url: "https://edge.example/x/y.git" });
 * console.log(summary.directory, summary.head, summary.phases.fetchResponse, summary.seconds);
 * ```
 */
export interface CloneSummary {
  directory: string;
  /** Bytes of the pack that came inline in the fetch response. */
  bytesInline: number;
  /** Bytes downloaded from packfile URIs. */
  bytesByUri: number;
  seconds: number;
  packs: PackfileResult[];
  /** The ref HEAD points at, or null when detached or the remote is empty. */
  head: string | null;
  /**
   * When each step ended, seconds since the clone started (where a clone's fixed cost goes):
   * `connect` (capabilities), `lsRefs` (with `git init`), `fetchResponse` (the fetch answered),
   * `setup` (remote, HEAD and upstream config, written meanwhile), `inlineIndexed`, `uriPacks`
   * (all downloaded and indexed), `connectivity`, `finish` (refs, checkout). Steps that overlap end in any order.
   */
  phases: Record<string, number>;
}

/**
 * Clones `options.url` into a new directory and returns a summary.
 *
 * @example Clone through an edge, packfile URIs downloaded in parallel
 * ```ts
 * const summary = await clone({ url: "https://edge.example/x/y.git", directory: "y", jobs: 8 });
 * console.log(`${summary.bytesByUri} bytes by URI, ${summary.bytesInline} inline`);
 * ```
 */
export async function clone(options: CloneOptions): Promise<CloneSummary> {
  const started = performance.now();
  const directory = options.directory ?? defaultDirectory(options.url, options.bare ?? false);
  const createdDir = await prepareTarget(directory);
  try {
    const result = await cloneInto(directory, options, started);
    return { ...result, directory, seconds: (performance.now() - started) / 1000 };
  } catch (error) {
    await removeTarget(directory, createdDir);
    throw error;
  }
}

async function cloneInto(
  directory: string,
  options: CloneOptions,
  started: number,
): Promise<Omit<CloneSummary, "directory" | "seconds">> {
  const phases: Record<string, number> = {};
  const mark = (name: string) => {
    phases[name] = Math.round(performance.now() - started) / 1000;
  };
  const bare = options.bare ?? false;
  const credentials = new CredentialManager(
    options.url,
    options.authorization,
    options.credentialHelper ?? new GitCredentialHelper(),
  );
  const http = new SmartHttpClient({ credentials, fetch: options.fetch, signal: options.signal });
  options.progress?.phase("Connecting");
  // ls-refs goes out with the capability request (see connectListingRefs).
  const { session, refs: listed } = await UploadPackSession.connectListingRefs(http, [
    "refs/heads/",
    "refs/tags/",
    "HEAD",
  ]);
  mark("connect");
  if (options.filter !== undefined && !session.supportsFilter) {
    // As git: the whole clone, and no promisor remote that would promise what it does not have.
    options.onWarning?.("filtering not recognized by server, ignoring");
    options = { ...options, filter: undefined };
  }
  const format = `--object-format=${session.objectFormat}`;
  // `git init` runs during ls-refs; both settle before anything fails (the directory may go).
  const [refs] = await settleAll(
    [
      listed,
      runGit(["init", "-q", format, ...(bare ? ["--bare"] : []), directory]),
    ] as const,
  );
  mark("lsRefs");
  const gitDir = bare ? directory : `${directory}/.git`;
  // `-c` first, then (as git) `submodule.active` for --recurse-submodules, before the remote.
  const config = [
    ...(options.config ?? []),
    ...(options.recurseSubmodules ? [["submodule.active", "."] as [string, string]] : []),
  ];
  if (config.length > 0) await writeConfig(gitDir, config);
  const haves = options.reference?.length ? await addReferences(gitDir, options.reference) : [];
  const singleBranch = options.singleBranch ?? options.depth !== undefined;
  const plan = planClone(refs, {
    branch: options.branch,
    singleBranch,
    noTags: options.noTags,
    revision: options.revision,
  }, bare);
  const checkout = plan.checkout;
  const wants = plan.wants;
  // What needs no objects (remote, HEAD, upstream config, origin/HEAD) is written while the
  // packs arrive; refs, a detached HEAD and the checkout wait for them.
  const [received, head] = await settleAll<[Received, string | null]>([
    receiveObjects(session, plan, haves, gitDir, credentials, options, mark),
    prepareRepository(gitDir, options.url, refs, plan.branches, checkout, bare, {
      fetchRefspec: plan.fetchRefspec,
      noTags: options.noTags,
      filter: options.filter,
    }).then((h) => {
      mark("setup");
      return h;
    }),
  ]);
  const signal = options.signal;
  // The connectivity check, writing refs and the checkout (of a commit, not of HEAD) are
  // independent: all three run at once; a failure of any fails the clone (the directory goes).
  const finish = async () => {
    const checkingOut = !bare && checkout.oid !== null && !options.noCheckout;
    if (checkingOut) options.progress?.phase("Checking out");
    // Tags followed (single branch) are written only where their object came along, as git.
    const followed = plan.followTags.length === 0
      ? []
      : await followedTags(gitDir, plan.followTags);
    await settleAll<[void, void]>([
      writeRefs(gitDir, [...plan.branches, ...plan.tags, ...followed], bare, checkout).then(
        async () => {
          if (checkout.ref === null && checkout.oid !== null) {
            await detachHead(gitDir, checkout.oid);
          }
        },
      ),
      checkingOut ? checkOut(directory, checkout.oid!, signal) : Promise.resolve(),
    ]);
    if (checkingOut && options.recurseSubmodules) {
      options.progress?.phase("Cloning submodules");
      await updateSubmodules(directory, { quiet: !options.serverProgress, signal });
    }
    mark("finish");
  };
  if (wants.length > 0) options.progress?.phase("Checking connectivity");
  await settleAll<[void, void]>([
    wants.length > 0
      ? checkConnectivity(gitDir, wants, {
        packBytes: received.bytesInline + received.bytesByUri,
        promisor: options.filter !== undefined,
        signal,
      }).then(() => mark("connectivity"))
      : Promise.resolve(),
    finish(),
  ]);
  return { ...received, head, phases };
}

/** The tags among `tags` whose object is in the repository. */
async function followedTags(gitDir: string, tags: RemoteRef[]): Promise<RemoteRef[]> {
  const present = await presentObjects(gitDir, tags.map((t) => t.oid!));
  return tags.filter((t) => present.has(t.oid!));
}

/** What {@link receiveObjects} brought in. */
type Received = Pick<CloneSummary, "bytesInline" | "bytesByUri" | "packs">;

/**
 * Fetches `wants`: indexes the inline pack while downloading the announced packfile URIs in
 * parallel. The caller checks connectivity.
 */
async function receiveObjects(
  session: UploadPackSession,
  plan: ClonePlan,
  haves: string[],
  gitDir: string,
  credentials: CredentialManager,
  options: CloneOptions,
  mark: (phase: string) => void,
): Promise<Received> {
  const wants = plan.wants;
  if (wants.length === 0) return { bytesInline: 0, bytesByUri: 0, packs: [] };
  options.progress?.phase("Receiving pack");
  const response = await session.fetch(wants, {
    packfileUris: session.supportsPackfileUris,
    progress: options.serverProgress ?? false,
    onRemoteProgress: options.progress?.remote?.bind(options.progress),
    depth: options.depth,
    filter: options.filter,
    includeTag: plan.includeTag,
    haves,
  });
  mark("fetchResponse");
  // Before the connectivity check, which must stop at the shallow boundary.
  if (response.shallow.length > 0) await writeShallow(gitDir, response.shallow);
  const baseUrl = session.http.baseUrl;
  // The URI packs are self-contained, so their downloads need not wait for the inline pack's
  // index (stock git waits); a failure of either stops the other.
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  const both = [
    indexInlinePack(response.pack, gitDir, baseUrl, options.progress, signal, {
      promisor: options.filter !== undefined,
    }).then((bytes) => {
      mark("inlineIndexed");
      return bytes;
    }),
    fetchUriPacks(response.uris, gitDir, baseUrl, credentials, { ...options, signal }).then(
      (packs) => {
        mark("uriPacks");
        return packs;
      },
    ),
  ] as const;
  both.forEach((p) => p.catch((error) => stop.abort(error)));
  const [bytesInline, packs] = await settleAll<[number, PackfileResult[]]>(both);
  const bytesByUri = packs.reduce((sum, p) => sum + p.bytes, 0);
  return { bytesInline, bytesByUri, packs };
}

/** Downloads the announced packs; credentials go only to the repository's own origin. */
function fetchUriPacks(
  uris: PackfileUri[],
  gitDir: string,
  baseUrl: string,
  credentials: CredentialManager,
  options: CloneOptions,
): Promise<PackfileResult[]> {
  const origin = new URL(baseUrl).origin;
  const authorization = credentials.authorization;
  if (uris.length > 0) options.progress?.phase("Receiving packfile URIs");
  return fetchPackfiles(uris, {
    gitDir,
    jobs: options.jobs ?? 0,
    signal: options.signal,
    fetch: options.fetch,
    onProgress: options.progress ? (e) => options.progress?.packEvent(e) : undefined,
    onObjects: options.progress?.objects
      ? (hash, counts) => options.progress?.objects?.(hash, counts)
      : undefined,
    trustEdgeIndex: options.trustEdgeIndex,
    spool: options.spool,
    headersFor: (uri: string): Record<string, string> =>
      authorization && URL.parse(uri)?.origin === origin ? { authorization } : {},
  });
}
