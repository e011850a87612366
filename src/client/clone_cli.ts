/**
 * `gitedge clone`: argument parsing, terminal output and exit codes around {@link clone}.
 */
import { clone, type CloneSummary, defaultDirectory } from "./clone.ts";
import {
  AuthenticationError,
  ConnectivityError,
  EdgeIndexError,
  HttpStatusError,
  IndexPackError,
  NetworkError,
  PackfileDownloadError,
  StallError,
  UsageError,
  VerificationError,
} from "./errors.ts";
import { SPOOL_MODES, type SpoolMode } from "./packfile_download.ts";
import { ProgressView } from "./progress_view.ts";
import { redactUrl } from "../redact.ts";
import { VERSION } from "../version.ts";
import { SIGNAL_EXIT, type StopSignal } from "./signals.ts";

/**
 * Exit codes of `gitedge clone` (a stable interface).
 *
 * @example Telling a network failure from a bad pack
 * ```ts
 * const code = await cloneMain(["https://edge.example/x/y.git"]);
 * const retryLater = code === EXIT.network;
 * const corrupt = code === EXIT.verification;
 * ```
 */
export const EXIT = { ok: 0, other: 1, usage: 2, network: 3, verification: 4 } as const;

const HELP = `usage: gitedge clone <url> [<dir>] [options]

Clones a repository over Git smart HTTP (protocol v2). When the server announces packfile URIs
(for example a gitedge edge), those packs are downloaded in parallel, each into its own git
index-pack, with resumable retries. The result is an ordinary git repository.

options (git clone's meaning; packs by URI only for full clones, the edge caches the rest):
  -b, --branch <b>      check out <b> (a branch, or a tag: detached) instead of the remote HEAD
  --depth <n>           shallow clone of <n> commits (implies --single-branch)
  --single-branch, --no-single-branch
                        only the branch to check out (and the tags pointing into it)
  --no-tags             no tags, now or in later fetches (remote.origin.tagOpt)
  --revision <rev>      one commit (a ref name or a full object id), detached, no refs
  --filter <spec>       partial clone (e.g. blob:none); git fetches what is missing lazily
  -n, --no-checkout     no checkout of HEAD
  --recurse-submodules  then initialise and clone the submodules (git submodule update)
  --reference <repo>    borrow objects from a local repository (alternates; repeatable)
  -c, --config <key>=<value>
                        set a config variable in the new repository (repeatable)
  --bare                make a bare repository (refs/heads/* mirror the remote's branches)
  -q, --quiet           print nothing on success
  --progress            show progress even when stderr is not a terminal
  --version             print the version
  --jobs <n>            parallel packfile-URI downloads (default 0 = min(8, number of packs))
  --json                print one JSON summary on stdout (bytesInline, bytesByUri, seconds,
                        packs)
  --trust-edge-index    for packs whose edge keeps their index (gitedge serve --pack-indexes
                        on): download the index and check checksums instead of running git
                        index-pack. Only for an edge you run yourself: an object may then not
                        hash to its name (git fsck finds it). Packs without an index are
                        indexed as usual.
  --spool <mode>        where a URI pack goes while it downloads: auto (default) spools it to
                        a file and indexes it once complete when the link is fast (all
                        downloads together >= 32 MiB/s in its first 250 ms), else streams it
                        into index-pack; always; never (always stream)
  -h, --help            show this help

credentials: GITEDGE_AUTHORIZATION (a full Authorization header value), user:password in the
URL, or 'git credential fill' when the server answers 401. They are never printed.

exit codes:
  0  success
  1  other failure (e.g. the directory exists, branch not found)
  2  usage error
  3  network failure (unreachable, HTTP error, authentication, downloads exhausted)
  4  verification failure (corrupt pack, hash mismatch, missing objects)
  130, 143  stopped by SIGINT, SIGTERM (what the clone created is removed first)
`;

/** The hint after a usage error (instead of the whole help). */
export const USAGE_HINT = "see 'gitedge clone --help'";

/** Bounds on option values (every input has one). */
const MAX_DEPTH = 2 ** 31 - 1;
const MAX_VALUE_LENGTH = 4096;

/** What the command line asked for. */
export interface CloneArgs {
  url: string;
  directory?: string;
  jobs: number;
  bare: boolean;
  branch?: string;
  json: boolean;
  help: boolean;
  trustEdgeIndex: boolean;
  spool: SpoolMode;
  depth?: number;
  singleBranch?: boolean;
  noTags?: boolean;
  revision?: string;
  filter?: string;
  noCheckout?: boolean;
  recurseSubmodules?: boolean;
  /** `--reference <repo>`, in order. */
  reference?: string[];
  /** `-c key=value`, in order. */
  config?: [string, string][];
  quiet?: boolean;
  /** `--progress` (true) or `--no-progress` (false); default: when stderr is a terminal. */
  progress?: boolean;
  version?: boolean;
}

/**
 * Parses `gitedge clone` arguments; throws {@link UsageError} on anything it does not accept.
 *
 * @example Flags as `gitedge clone` reads them
 * ```ts
 * const args = parseCloneArgs(["https://edge.example/x/y.git", "--depth", "1", "--bare"]);
 * args.depth; // 1
 * args.bare; // true
 * ```
 */
export function parseCloneArgs(args: readonly string[]): CloneArgs {
  const parsed: Omit<CloneArgs, "url"> & { url?: string } = {
    jobs: 0,
    bare: false,
    json: false,
    help: false,
    trustEdgeIndex: false,
    spool: "auto",
  };
  const positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const [flag, inline] = arg.startsWith("--") && arg.includes("=")
      ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)]
      : [arg, undefined];
    const value = (): string => {
      const v = inline ?? args[++i];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      if (v.length > MAX_VALUE_LENGTH) throw new UsageError(`${flag}: value too long`);
      return v;
    };
    switch (flag) {
      case "--version":
        parsed.version = true;
        break;
      case "-q":
      case "--quiet":
        parsed.quiet = true;
        break;
      case "--progress":
        parsed.progress = true;
        break;
      case "--no-progress":
        parsed.progress = false;
        break;
      case "--depth": {
        const v = value();
        if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > MAX_DEPTH) {
          throw new UsageError(`depth ${v} is not a positive number`);
        }
        parsed.depth = Number(v);
        break;
      }
      case "--single-branch":
        parsed.singleBranch = true;
        break;
      case "--no-single-branch":
        parsed.singleBranch = false;
        break;
      case "--no-tags":
        parsed.noTags = true;
        break;
      case "--revision": {
        const v = value();
        if (!printable(v) || /[\s~^:?*[\\]/.test(v) || v.startsWith("-")) {
          throw new UsageError(`--revision needs a ref name or an object id, got '${v}'`);
        }
        parsed.revision = v;
        break;
      }
      case "--filter": {
        const v = value();
        if (!printable(v) || /\s/.test(v)) throw new UsageError(`invalid filter-spec '${v}'`);
        parsed.filter = v;
        break;
      }
      case "-n":
      case "--no-checkout":
        parsed.noCheckout = true;
        break;
      case "--recurse-submodules":
        parsed.recurseSubmodules = true;
        break;
      case "--reference":
        (parsed.reference ??= []).push(value());
        break;
      case "-c":
      case "--config": {
        const v = value();
        const eq = v.indexOf("=");
        const key = eq < 0 ? v : v.slice(0, eq);
        if (eq < 0 || !/^[A-Za-z0-9][A-Za-z0-9-]*\.(.+\.)?[A-Za-z][A-Za-z0-9-]*$/s.test(key)) {
          throw new UsageError(`-c needs <key>=<value> with a valid key, got '${v}'`);
        }
        (parsed.config ??= []).push([key, v.slice(eq + 1)]);
        break;
      }
      case "-h":
      case "--help":
        parsed.help = true;
        break;
      case "--bare":
        parsed.bare = true;
        break;
      case "--json":
        parsed.json = true;
        break;
      case "--trust-edge-index":
        parsed.trustEdgeIndex = true;
        break;
      case "--jobs":
      case "-j": {
        const v = value();
        if (!/^\d+$/.test(v)) {
          throw new UsageError(`--jobs needs a non-negative integer, got '${v}'`);
        }
        parsed.jobs = Number(v);
        break;
      }
      case "--spool": {
        const v = value();
        if (!(SPOOL_MODES as readonly string[]).includes(v)) {
          throw new UsageError(`--spool needs one of ${SPOOL_MODES.join(", ")}, got '${v}'`);
        }
        parsed.spool = v as SpoolMode;
        break;
      }
      case "--branch":
      case "-b":
        parsed.branch = value();
        break;
      case "--":
        positional.push(...args.slice(i + 1));
        i = args.length;
        break;
      default:
        if (arg.startsWith("-")) throw new UsageError(`unknown option '${flag}'`);
        positional.push(arg);
    }
  }
  if (parsed.help || parsed.version) return { ...parsed, url: positional[0] ?? "" };
  if (parsed.revision !== undefined && parsed.branch !== undefined) {
    throw new UsageError("options '--revision' and '--branch' cannot be used together");
  }

  if (positional.length === 0) throw new UsageError("missing repository URL");
  if (positional.length > 2) throw new UsageError(`too many arguments: ${positional.slice(2)}`);
  const [url, directory] = positional;
  const protocol = URL.parse(url)?.protocol;
  if (protocol !== "http:" && protocol !== "https:") {
    throw new UsageError(
      `only http(s) URLs are supported, got '${redactUrl(url)}'`,
    );
  }
  return { ...parsed, url, directory };
}

export { SIGNAL_EXIT } from "./signals.ts";

/** The clone was stopped by a signal (its reason when aborted). */
export class StoppedError extends Error {
  override name = "StoppedError";
  constructor(readonly signal: StopSignal) {
    super(`stopped by ${signal}`);
  }
}

/** Printable ASCII only (what ref names and filter specs on a command line are). */
function printable(value: string): boolean {
  return [...value].every((c) => c >= "!" && c <= "~");
}

/**
 * Runs `gitedge clone` and returns its exit code.
 *
 * @example Run `gitedge clone` from a script
 * ```ts
 * const code = await cloneMain(["https://edge.example/x/y.git", "y", "--jobs", "8"]);
 * if (code !== EXIT.ok) console.error(`clone failed with exit code ${code}`);
 * ```
 */
export async function cloneMain(args: string[]): Promise<number> {
  let options: CloneArgs;
  try {
    options = parseCloneArgs(args);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`gitedge clone: ${error.message}\n${USAGE_HINT}`);
    return EXIT.usage;
  }
  if (options.help) {
    console.log(HELP);
    return EXIT.ok;
  }
  if (options.version) {
    console.log(`gitedge version ${VERSION}`);
    return EXIT.ok;
  }
  const quiet = options.quiet ?? false;
  const showProgress = !quiet && (options.progress ?? Deno.stderr.isTerminal());
  const view = showProgress ? new ProgressView() : null;
  // SIGINT and SIGTERM stop the downloads and every child process; the clone then removes what
  // it created and the exit code says which signal (a second one exits at once).
  const interrupt = new AbortController();
  let stoppedBy: StopSignal | null = null;
  const listeners = (Object.keys(SIGNAL_EXIT) as StopSignal[]).map((name) => {
    const listener = () => {
      if (stoppedBy !== null) Deno.exit(SIGNAL_EXIT[stoppedBy]);
      stoppedBy = name;
      interrupt.abort(new StoppedError(name));
    };
    Deno.addSignalListener(name, listener);
    return [name, listener] as const;
  });
  const directory = options.directory ?? defaultDirectory(options.url, options.bare);
  if (!quiet) {
    console.error(
      options.bare
        ? `Cloning into bare repository '${directory}'...`
        : `Cloning into '${directory}'...`,
    );
  }
  try {
    // Seconds from the runtime's time origin to here: Deno's start-up and module loading.
    const startedAt = performance.now() / 1000;
    const summary = await clone({
      url: options.url,
      directory,
      jobs: options.jobs,
      bare: options.bare,
      branch: options.branch,
      authorization: Deno.env.get("GITEDGE_AUTHORIZATION"),
      progress: view ?? undefined,
      serverProgress: view !== null,
      signal: interrupt.signal,
      trustEdgeIndex: options.trustEdgeIndex,
      spool: options.spool,
      depth: options.depth,
      singleBranch: options.singleBranch,
      noTags: options.noTags,
      revision: options.revision,
      filter: options.filter,
      onWarning: (message) => console.error(`warning: ${message}`),
      noCheckout: options.noCheckout,
      recurseSubmodules: options.recurseSubmodules,
      reference: options.reference,
      config: options.config,
    });
    view?.finish();
    if (options.json) console.log(JSON.stringify(jsonSummary(summary, startedAt)));
    if (!quiet) console.error(summaryLine(summary));
    return EXIT.ok;
  } catch (error) {
    view?.finish();
    if (stoppedBy !== null) return SIGNAL_EXIT[stoppedBy];
    console.error(`gitedge clone: error: ${error instanceof Error ? error.message : error}`);
    return exitCodeFor(error);
  } finally {
    for (const [name, listener] of listeners) Deno.removeSignalListener(name, listener);
  }
}

/** The one line a clone ends with: what came, how, and how fast. */
export function summaryLine(summary: CloneSummary): string {
  const bytes = summary.bytesInline + summary.bytesByUri;
  const seconds = Math.max(summary.seconds, 0.001);
  const packs = summary.packs.length;
  const how = packs > 0
    ? `${packs} pack${packs === 1 ? "" : "s"} by URI (${formatBytes(summary.bytesByUri)}) + ` +
      `${formatBytes(summary.bytesInline)} inline`
    : "inline";
  return `Received ${formatBytes(bytes)} in ${seconds.toFixed(2)} s ` +
    `(${formatBytes(bytes / seconds)}/s; ${how}) into '${summary.directory}'.`;
}

function formatBytes(bytes: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${Math.round(value)} bytes` : `${value.toFixed(2)} ${units[unit]}`;
}

/**
 * The `--json` document; `startedAt` (when given) is the seconds from the runtime's time origin to
 * the clone's start: Deno's own start-up and module loading.
 */
export function jsonSummary(summary: CloneSummary, startedAt?: number) {
  return {
    directory: summary.directory,
    bytesInline: summary.bytesInline,
    bytesByUri: summary.bytesByUri,
    seconds: round(summary.seconds),
    ...(startedAt === undefined ? {} : { startedAt: round(startedAt) }),
    phases: summary.phases,
    packs: summary.packs.map((p) => ({
      hash: p.hash,
      bytes: p.bytes,
      seconds: round(p.seconds),
      retries: p.retries,
      ...(p.edgeIndex ? { edgeIndex: true } : {}),
      ...(p.spooled ? { spooled: true } : {}),
    })),
  };
}

/**
 * Maps a failure to the documented exit code.
 *
 * @example The exit code of a usage error
 * ```ts
 * import { UsageError } from "./errors.ts";
 *
 * exitCodeFor(new UsageError("unknown option '--x'")) === EXIT.usage; // true
 * ```
 */
export function exitCodeFor(error: unknown): number {
  if (error instanceof UsageError) return EXIT.usage;
  if (
    error instanceof VerificationError || error instanceof IndexPackError ||
    error instanceof ConnectivityError || error instanceof EdgeIndexError
  ) return EXIT.verification;
  if (error instanceof PackfileDownloadError) {
    const cause = error.lastCause;
    return cause instanceof IndexPackError || cause instanceof VerificationError
      ? EXIT.verification
      : EXIT.network;
  }
  if (
    error instanceof NetworkError || error instanceof HttpStatusError ||
    error instanceof StallError || error instanceof AuthenticationError
  ) return EXIT.network;
  return EXIT.other;
}

function round(seconds: number): number {
  return Math.round(seconds * 1000) / 1000;
}
