/**
 * Parallel packfile-URI downloads: every URI goes into its own `git index-pack` (streamed, or
 * from a staged file on a fast link), at most `jobs` at a time, with resumable retries. The first
 * URI that cannot be fetched aborts the rest.
 */
import type { ObjectCounts } from "./index_progress.ts";
import { isObjectId } from "../git/object_id.ts";
import type { PackfileUri } from "../git/packfile_uris.ts";
import {
  downloadPackfile,
  type PackfileResult,
  SPOOL_MIN_RATE,
  SPOOL_MODES,
  type SpoolMode,
} from "./packfile_download.ts";
import { readFsyncsPacks } from "./fsync_config.ts";
import { runPool } from "./pool.ts";
import type { ProgressEvent } from "./progress.ts";

/**
 * Options for {@link fetchPackfiles}.
 *
 * @example Options of a download that gives up after ten minutes
 * ```ts
 * const options: FetchPackfilesOptions = {
 *   gitDir: "repo/.git",
 *   jobs: 0,
 *   retries: 2,
 *   signal: AbortSignal.timeout(600_000),
 * };
 * ```
 */
export interface FetchPackfilesOptions {
  /** The repository the packs go into (its `objects/pack` is created if missing). */
  gitDir: string;
  /** Parallel downloads; 0 or absent means min(8, number of URIs). */
  jobs?: number;
  /** Extra attempts per URI after the first (default 4). */
  retries?: number;
  /** Idle timeout per request: no headers or bytes for this long fails the attempt (default 30 s). */
  timeoutMs?: number;
  /** Base of the exponential backoff between attempts (default 250 ms). */
  backoffMs?: number;
  /** Headers sent with every request (e.g. `Authorization`). */
  headers?: Record<string, string>;
  /** Extra headers per URI (e.g. credentials only for the repository's own origin). */
  headersFor?: (uri: string) => Record<string, string>;
  /** Extra `git index-pack` arguments (e.g. `--strict`). */
  indexPackArgs?: string[];
  /**
   * Whether a pack goes to a file first and is indexed once complete ("always"), streams into
   * index-pack ("never"), or either by the link's speed ("auto", the default).
   */
  spool?: SpoolMode;
  /**
   * The rate (bytes/s, all downloads together) at which "auto" keeps spooling; default
   * `SPOOL_MIN_RATE` (32 MiB/s). Tests lower it to judge the choice without loading the CPU.
   */
  spoolMinRate?: number;
  /** Receives progress events; called synchronously, so keep it cheap. */
  onProgress?: (event: ProgressEvent) => void;
  /** Object counts of each pack's index-pack as it goes (runs index-pack with `-v`). */
  onObjects?: (hash: string, counts: ObjectCounts) => void;
  /** Aborts every download (already installed packs stay). */
  signal?: AbortSignal;
  /** The fetch implementation (defaults to the global one). */
  fetch?: typeof fetch;
  /** Install with the edge's `.idx` where it has one, checked, instead of index-pack (opt-in). */
  trustEdgeIndex?: boolean;
}

/**
 * Default parallelism cap when `jobs` is 0 or absent.
 *
 * @example The cap when no `jobs` is given
 * ```ts
 * resolveJobs(undefined, 100) === DEFAULT_MAX_JOBS; // true
 * ```
 */
export const DEFAULT_MAX_JOBS = 8;

/**
 * Downloads every URI into `options.gitDir` and resolves with one result per URI, in input order.
 * Rejects with the first failure: `PackfileDownloadError` (names the URI, attempts and last
 * cause) or `VerificationError` (checksum mismatch).
 *
 * @example Download a fetch answer's packfile URIs into a repository
 * ```ts
 * const results = await fetchPackfiles(
 *   [{ hash: "0123456789abcdef0123456789abcdef01234567", uri: "https://edge.example/_edge/packs/r/p.pack?exp=1&sig=s" }],
 *   {
 *     gitDir: "repo/.git",
 *     jobs: 4,
 *     onProgress: (event) => {
 *       if (event.type === "done") console.log(`${event.hash}: ${event.seconds} s`);
 *     },
 *   },
 * );
 * for (const pack of results) console.log(pack.packPath, pack.bytes);
 * ```
 */
export async function fetchPackfiles(
  uris: readonly PackfileUri[],
  options: FetchPackfilesOptions,
): Promise<PackfileResult[]> {
  for (const { hash, uri } of uris) validateEntry(hash, uri);
  if (uris.length === 0) return [];
  await Deno.mkdir(`${options.gitDir}/objects/pack`, { recursive: true });
  const settings = {
    gitDir: options.gitDir,
    retries: nonNegative(options.retries, 4, "retries"),
    timeoutMs: positive(options.timeoutMs, 30_000, "timeoutMs"),
    backoffMs: nonNegative(options.backoffMs, 250, "backoffMs"),
    headersFor: (uri: string) => ({ ...options.headers, ...options.headersFor?.(uri) }),
    indexPackArgs: options.indexPackArgs ?? [],
    spool: spoolMode(options.spool),
    spoolMinRate: positive(options.spoolMinRate, SPOOL_MIN_RATE, "spoolMinRate"),
    arrivals: { total: 0 },
    // Read once, by the first download that stages a pack (a streamed one never asks).
    fsyncPacks: once(() => readFsyncsPacks(options.gitDir).catch(() => true)),
    onProgress: options.onProgress ?? (() => {}),
    onObjects: options.onObjects,
    fetch: options.fetch ?? fetch,
  };
  // Loaded only when asked for: it brings node:crypto, whose start-up costs every clone ~25 ms.
  const download = options.trustEdgeIndex
    ? (await import("./edge_index.ts")).downloadWithEdgeIndex
    : downloadPackfile;
  const tasks = uris.map((entry) => (signal: AbortSignal) => download(entry, settings, signal));
  return await runPool(tasks, {
    concurrency: resolveJobs(options.jobs, uris.length),
    signal: options.signal,
  });
}

/**
 * The number of parallel downloads for `count` URIs: `jobs`, or min(8, count) when 0/absent.
 *
 * @example Parallel downloads for a number of URIs
 * ```ts
 * resolveJobs(undefined, 3); // 3: one per URI
 * resolveJobs(0, 20); // 8: DEFAULT_MAX_JOBS
 * resolveJobs(2, 20); // 2: as asked
 * ```
 */
export function resolveJobs(jobs: number | undefined, count: number): number {
  if (jobs === undefined || jobs === 0) return Math.max(1, Math.min(DEFAULT_MAX_JOBS, count));
  if (!Number.isInteger(jobs) || jobs < 0) {
    throw new RangeError(`jobs must be a non-negative integer, got ${jobs}`);
  }
  return jobs;
}

function validateEntry(hash: string, uri: string): void {
  // Upper-case hex is accepted here (the download compares in lower case).
  if (!isObjectId(hash.toLowerCase())) {
    throw new TypeError(`invalid pack hash ${JSON.stringify(hash)}`);
  }
  const protocol = URL.parse(uri)?.protocol;
  if (protocol !== "http:" && protocol !== "https:") {
    throw new TypeError(`packfile URI must be http(s), got ${JSON.stringify(uri)}`);
  }
}

function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

function spoolMode(value: SpoolMode | undefined): SpoolMode {
  if (value === undefined) return "auto";
  if (!SPOOL_MODES.includes(value)) {
    throw new RangeError(`spool must be one of ${SPOOL_MODES.join(", ")}, got ${value}`);
  }
  return value;
}

function nonNegative(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`${name} must be >= 0`);
  return value;
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be > 0`);
  return value;
}
