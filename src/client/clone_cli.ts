/**
 * `gitedge clone`: argument parsing, terminal output and exit codes around {@link clone}.
 */
import { clone, type CloneSummary } from "./clone.ts";
import {
  AuthenticationError,
  CloneError,
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
import { redactUrl } from "./redact.ts";

/** Exit codes of `gitedge clone` (a stable interface). */
export const EXIT = { ok: 0, other: 1, usage: 2, network: 3, verification: 4 } as const;

const HELP = `usage: gitedge clone <url> [<dir>] [options]

Clones a repository over Git smart HTTP (protocol v2). When the server announces packfile URIs
(for example a gitedge edge), those packs are downloaded in parallel, each into its own git
index-pack, with resumable retries. The result is an ordinary git repository.

options:
  --jobs <n>      parallel packfile-URI downloads (default 0 = min(8, number of packs))
  --bare          make a bare repository (refs/heads/* mirror the remote's branches)
  --branch <b>    check out <b> instead of the remote's HEAD (-b <b> also works)
  --json          print one JSON summary on stdout (bytesInline, bytesByUri, seconds, packs)
  --trust-edge-index
                  for packs whose edge keeps their index (gitedge serve --pack-indexes on):
                  download the index and check checksums instead of running git index-pack.
                  Only for an edge you run yourself: an object may then not hash to its name
                  (git fsck finds it). Packs without an index are indexed as usual.
  --spool <mode>  where a URI pack goes while it downloads: auto (default) spools it to a file
                  and indexes it once complete when the link is fast (all downloads together
                  >= 32 MiB/s in its first 250 ms), else streams it into index-pack; always;
                  never (always stream)
  -h, --help      show this help

credentials: GITEDGE_AUTHORIZATION (a full Authorization header value), user:password in the
URL, or 'git credential fill' when the server answers 401. They are never printed.

exit codes:
  0  success
  1  other failure (e.g. the directory exists, branch not found)
  2  usage error
  3  network failure (unreachable, HTTP error, authentication, downloads exhausted)
  4  verification failure (corrupt pack, hash mismatch, missing objects)
`;

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
}

/** Parses `gitedge clone` arguments; throws {@link UsageError} on anything it does not accept. */
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
      return v;
    };
    switch (flag) {
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
  if (parsed.help) return { ...parsed, url: positional[0] ?? "" };
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

/** Runs `gitedge clone` and returns its exit code. */
export async function cloneMain(args: string[]): Promise<number> {
  let options: CloneArgs;
  try {
    options = parseCloneArgs(args);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`gitedge clone: ${error.message}\n\n${HELP}`);
    return EXIT.usage;
  }
  if (options.help) {
    console.log(HELP);
    return EXIT.ok;
  }
  const view = Deno.stderr.isTerminal() ? new ProgressView() : null;
  const interrupt = new AbortController();
  const onInterrupt = () => interrupt.abort(new CloneError("interrupted"));
  Deno.addSignalListener("SIGINT", onInterrupt);
  try {
    // Seconds from the runtime's time origin to here: Deno's start-up and module loading.
    const startedAt = performance.now() / 1000;
    const summary = await clone({
      url: options.url,
      directory: options.directory,
      jobs: options.jobs,
      bare: options.bare,
      branch: options.branch,
      authorization: Deno.env.get("GITEDGE_AUTHORIZATION"),
      progress: view ?? undefined,
      serverProgress: view !== null,
      signal: interrupt.signal,
      trustEdgeIndex: options.trustEdgeIndex,
      spool: options.spool,
    });
    view?.finish();
    if (options.json) console.log(JSON.stringify(jsonSummary(summary, startedAt)));
    else if (view) console.error(`Cloned into '${summary.directory}'.`);
    return EXIT.ok;
  } catch (error) {
    view?.finish();
    console.error(`gitedge clone: error: ${error instanceof Error ? error.message : error}`);
    return exitCodeFor(error);
  } finally {
    Deno.removeSignalListener("SIGINT", onInterrupt);
  }
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

/** Maps a failure to the documented exit code. */
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
