/**
 * `gitedge clone` as a function: protocol v2 `ls-refs` and `fetch` over smart HTTP, the inline
 * pack streamed into `git index-pack --fix-thin`, announced packfile URIs downloaded in parallel
 * with {@link fetchPackfiles}, a connectivity check, then refs, HEAD, the `origin` remote and the
 * checkout written the way `git clone` writes them. A failed clone removes what it created.
 */
import { type CredentialHelper, CredentialManager, GitCredentialHelper } from "./credentials.ts";
import { GitFormatError } from "../git/errors.ts";
import { CloneError, ConnectivityError, GitProcessError, NetworkError } from "./errors.ts";
import { fetchPackfiles } from "./fetch_packfiles.ts";
import { runGit } from "./git_command.ts";
import { PackIndexer } from "./index_pack.ts";
import type { PackfileResult, PackfileUri } from "./packfile_download.ts";
import type { ProgressEvent } from "./progress.ts";
import { SmartHttpClient } from "./smart_http.ts";
import { type RemoteRef, UploadPackSession } from "./upload_pack.ts";

/** Where a clone reports progress (the CLI's `ProgressView` implements it). */
export interface CloneProgress {
  phase(name: string): void;
  /** Bytes of the inline pack received so far. */
  inline(bytes: number): void;
  packEvent(event: ProgressEvent): void;
  /** A progress message from the server (only when `serverProgress` is on). */
  remote?(message: string): void;
}

/** Options for {@link clone}. */
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
}

/** What a clone transferred. */
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
}

/** Clones `options.url` into a new directory and returns a summary. */
export async function clone(options: CloneOptions): Promise<CloneSummary> {
  const started = performance.now();
  const directory = options.directory ?? defaultDirectory(options.url, options.bare ?? false);
  const createdDir = await prepareTarget(directory);
  try {
    const result = await cloneInto(directory, options);
    return { ...result, directory, seconds: (performance.now() - started) / 1000 };
  } catch (error) {
    await removeTarget(directory, createdDir);
    throw error;
  }
}

async function cloneInto(
  directory: string,
  options: CloneOptions,
): Promise<Omit<CloneSummary, "directory" | "seconds">> {
  const bare = options.bare ?? false;
  const credentials = new CredentialManager(
    options.url,
    options.authorization,
    options.credentialHelper ?? new GitCredentialHelper(),
  );
  const http = new SmartHttpClient({ credentials, fetch: options.fetch, signal: options.signal });
  options.progress?.phase("Connecting");
  const session = await UploadPackSession.connect(http);
  const refs = await session.lsRefs(["refs/heads/", "refs/tags/", "HEAD"]);
  const checkout = chooseCheckout(refs, options.branch);
  const format = `--object-format=${session.objectFormat}`;
  await runGit(["init", "-q", format, ...(bare ? ["--bare"] : []), directory]);
  const gitDir = bare ? directory : `${directory}/.git`;

  const received = await receiveObjects(session, wantedObjects(refs), gitDir, credentials, options);
  await writeRefs(gitDir, refs, bare);
  await configureRemote(gitDir, options.url, bare);
  const head = await writeHead(gitDir, checkout, bare);
  if (!bare) await writeRemoteHead(gitDir, refs);
  if (!bare && checkout.oid !== null) {
    options.progress?.phase("Checking out");
    await runGit(["reset", "-q", "--hard"], { cwd: directory });
  }
  return { ...received, head };
}

/** What {@link receiveObjects} brought in. */
type Received = Pick<CloneSummary, "bytesInline" | "bytesByUri" | "packs">;

/**
 * Fetches `wants`: indexes the inline pack, then downloads the announced packfile URIs in
 * parallel, then checks that everything the refs need is present.
 */
async function receiveObjects(
  session: UploadPackSession,
  wants: string[],
  gitDir: string,
  credentials: CredentialManager,
  options: CloneOptions,
): Promise<Received> {
  if (wants.length === 0) return { bytesInline: 0, bytesByUri: 0, packs: [] };
  options.progress?.phase("Receiving pack");
  const response = await session.fetch(wants, {
    packfileUris: session.supportsPackfileUris,
    progress: options.serverProgress ?? false,
    onRemoteProgress: options.progress?.remote?.bind(options.progress),
  });
  const baseUrl = session.http.baseUrl;
  const bytesInline = await indexInlinePack(
    response.pack,
    gitDir,
    baseUrl,
    options.progress,
    options.signal,
  );
  const packs = await fetchUriPacks(response.uris, gitDir, baseUrl, credentials, options);
  options.progress?.phase("Checking connectivity");
  await checkConnectivity(gitDir, wants);
  const bytesByUri = packs.reduce((sum, p) => sum + p.bytes, 0);
  return { bytesInline, bytesByUri, packs };
}

/** `git clone`'s default directory: the last path segment, minus `.git` (kept for bare). */
export function defaultDirectory(url: string, bare: boolean): string {
  const path = new URL(url).pathname.replace(/\/+$/, "").replace(/\/\.git$/, "");
  const last = path.slice(path.lastIndexOf("/") + 1).replace(/\.git$/, "") ||
    new URL(url).hostname;
  return bare ? `${last}.git` : last;
}

/** Creates the target (or accepts an existing empty one); returns whether we created it. */
async function prepareTarget(directory: string): Promise<boolean> {
  try {
    await Deno.mkdir(directory);
    return true;
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
  }
  for await (const _ of Deno.readDir(directory)) {
    throw new CloneError(`destination path '${directory}' already exists and is not empty`);
  }
  return false;
}

/** Undoes a failed clone: removes the directory we created, or empties the one we were given. */
async function removeTarget(directory: string, created: boolean): Promise<void> {
  if (created) {
    await Deno.remove(directory, { recursive: true });
    return;
  }
  for await (const entry of Deno.readDir(directory)) {
    await Deno.remove(`${directory}/${entry.name}`, { recursive: true });
  }
}

/** Every branch and tag tip, deduplicated. */
function wantedObjects(refs: RemoteRef[]): string[] {
  const oids = new Set<string>();
  for (const ref of refs) {
    if (ref.oid !== null && /^refs\/(heads|tags)\//.test(ref.name)) oids.add(ref.oid);
  }
  return [...oids];
}

/** What HEAD becomes: a branch (symbolic), a detached commit, or an unborn branch. */
interface Checkout {
  /** `refs/heads/<b>` for a branch, null when detached. */
  ref: string | null;
  /** The commit to check out, null for an unborn branch. */
  oid: string | null;
}

function chooseCheckout(refs: RemoteRef[], branch: string | undefined): Checkout {
  const byName = new Map(refs.map((r) => [r.name, r]));
  if (branch !== undefined) {
    const head = byName.get(`refs/heads/${branch}`);
    if (head?.oid) return { ref: head.name, oid: head.oid };
    const tag = byName.get(`refs/tags/${branch}`);
    if (tag?.oid) return { ref: null, oid: tag.peeled ?? tag.oid };
    throw new CloneError(`remote branch ${branch} not found in upstream origin`);
  }
  const head = byName.get("HEAD");
  if (head?.symrefTarget) {
    const target = byName.get(head.symrefTarget);
    return { ref: head.symrefTarget, oid: target?.oid ?? null };
  }
  if (head?.oid) return { ref: null, oid: head.oid };
  return { ref: null, oid: null };
}

/**
 * Streams the fetch response's pack into `index-pack --fix-thin`; returns its size. A transport
 * failure while reading becomes a {@link NetworkError}; malformed wire data keeps its own type.
 */
async function indexInlinePack(
  pack: ReadableStream<Uint8Array>,
  gitDir: string,
  url: string,
  progress: CloneProgress | undefined,
  signal: AbortSignal | undefined,
): Promise<number> {
  const indexer = PackIndexer.start({ gitDir, args: ["--fix-thin"] });
  const reader = pack.getReader();
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await readOrNetworkError(reader, url, signal);
      if (done) break;
      await indexer.write(value);
      bytes += value.byteLength;
      progress?.inline(bytes);
    }
    await indexer.finish();
    await indexer.install();
    return bytes;
  } finally {
    reader.releaseLock();
    await indexer.discard();
  }
}

async function readOrNetworkError(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  url: string,
  signal: AbortSignal | undefined,
): Promise<ReadableStreamReadResult<Uint8Array>> {
  try {
    return await reader.read();
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    if (error instanceof GitFormatError) throw error;
    throw new NetworkError(url, error);
  }
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
    headersFor: (uri: string): Record<string, string> =>
      authorization && URL.parse(uri)?.origin === origin ? { authorization } : {},
  });
}

/** Every wanted object and everything it reaches must be present. */
async function checkConnectivity(gitDir: string, wants: string[]): Promise<void> {
  try {
    await runGit(["rev-list", "--objects", "--quiet", "--stdin"], {
      gitDir,
      stdin: wants.join("\n") + "\n",
    });
  } catch (error) {
    if (error instanceof GitProcessError) throw new ConnectivityError(error.stderr);
    throw error;
  }
}

/** Branches as remote-tracking refs (or as local branches when bare), tags as tags. */
async function writeRefs(gitDir: string, refs: RemoteRef[], bare: boolean): Promise<void> {
  const lines: string[] = [];
  for (const ref of refs) {
    if (ref.oid === null) continue;
    if (ref.name.startsWith("refs/tags/")) lines.push(`create ${ref.name} ${ref.oid}`);
    else if (ref.name.startsWith("refs/heads/")) {
      const local = bare ? ref.name : `refs/remotes/origin/${ref.name.slice("refs/heads/".length)}`;
      lines.push(`create ${local} ${ref.oid}`);
    }
  }
  if (lines.length > 0) {
    await runGit(["update-ref", "--stdin"], { gitDir, stdin: lines.join("\n") + "\n" });
  }
}

/** `remote.origin.url`, plus git's default fetch refspec for non-bare clones. */
async function configureRemote(gitDir: string, url: string, bare: boolean): Promise<void> {
  await runGit(["config", "remote.origin.url", url], { gitDir });
  if (!bare) {
    await runGit(["config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"], {
      gitDir,
    });
  }
}

/** Points HEAD (and `origin/HEAD`) like git clone does; returns HEAD's ref or null. */
async function writeHead(
  gitDir: string,
  checkout: Checkout,
  bare: boolean,
): Promise<string | null> {
  if (checkout.ref === null) {
    if (checkout.oid !== null) {
      await runGit(["update-ref", "--no-deref", "HEAD", checkout.oid], { gitDir });
    }
    return null;
  }
  await runGit(["symbolic-ref", "HEAD", checkout.ref], { gitDir });
  if (bare || checkout.oid === null) return checkout.ref;
  const branch = checkout.ref.slice("refs/heads/".length);
  await runGit(["update-ref", checkout.ref, checkout.oid], { gitDir });
  await runGit(["config", `branch.${branch}.remote`, "origin"], { gitDir });
  await runGit(["config", `branch.${branch}.merge`, checkout.ref], { gitDir });
  return checkout.ref;
}

/** `refs/remotes/origin/HEAD` follows the remote's HEAD when it names an existing branch. */
async function writeRemoteHead(gitDir: string, refs: RemoteRef[]): Promise<void> {
  const target = refs.find((r) => r.name === "HEAD")?.symrefTarget;
  if (!target?.startsWith("refs/heads/")) return;
  if (!refs.some((r) => r.name === target && r.oid !== null)) return;
  const branch = target.slice("refs/heads/".length);
  await runGit(["symbolic-ref", "refs/remotes/origin/HEAD", `refs/remotes/origin/${branch}`], {
    gitDir,
  });
}
