/**
 * Downloading one packfile URI into a repository: the body goes to a staged file or streams into
 * `git index-pack` (see {@link SpoolMode}), broken transfers resume with `Range` into the same
 * file or index-pack, anything that cannot continue starts over, and the pack is installed only
 * when its checksum matches the advertised hash.
 */
import type { PackfileUri } from "../git/packfile_uris.ts";
import { backoffDelay, sleep } from "./backoff.ts";
import {
  HttpStatusError,
  IndexPackError,
  PackfileDownloadError,
  RangeMismatchError,
  StallError,
  TruncatedBodyError,
  VerificationError,
} from "./errors.ts";
import { IdleWatchdog } from "./idle_watchdog.ts";
import { PackIndexer, type PackSink } from "./index_pack.ts";
import type { ObjectCounts } from "./index_progress.ts";
import { PackSpool } from "./pack_spool.ts";
import type { ProgressEvent } from "./progress.ts";
import { planResponse } from "./ranged_response.ts";

/**
 * What one downloaded pack cost and where it landed.
 *
 * @example A line per downloaded pack
 * ```ts
 * function line(result: PackfileResult): string {
 *   return `${result.hash.slice(0, 12)} ${result.bytes} bytes, ${result.seconds} s, ` +
 *     `${result.retries} retries -> ${result.packPath}`;
 * }
 * ```
 */
export interface PackfileResult {
  hash: string;
  uri: string;
  /** Size of the pack in bytes. */
  bytes: number;
  /** Wall-clock time from the first request to the installed pack. */
  seconds: number;
  /** Attempts beyond the first. */
  retries: number;
  /** Path of the installed `pack-<hash>.pack`. */
  packPath: string;
  /** Installed with the edge's index instead of `git index-pack` (`--trust-edge-index`). */
  edgeIndex?: boolean;
  /** Spooled to a file and indexed once complete, instead of streamed into index-pack. */
  spooled?: boolean;
}

/**
 * Where a pack's bytes go while it downloads:
 * - "never": they stream into `git index-pack --stdin`, so indexing overlaps the
 *   transfer (best on a slow link, where the CPU would otherwise wait);
 * - "always": into a staged file, indexed by `git index-pack <file>` once complete (best on a
 *   fast link, where the CPU is the limit: no pipe ping-pong, the pack is not written twice);
 * - "auto": spooled for the first {@link SPOOL_PROBE_MS} of the body, then still spooled if the
 *   bytes of every download of the fetch together came at {@link SPOOL_MIN_RATE} or faster
 *   meanwhile (or the body ended), else handed to a streaming index-pack. The sum, not this
 *   download's own rate, is what the CPU has to keep up with: eight downloads at 12 MiB/s each
 *   load it as one at 96 MiB/s does, and each of them alone would look slow. The choice is
 *   made early once the window's worth at that rate has come (it could not turn out otherwise).
 */
export type SpoolMode = "auto" | "always" | "never";

/** The spool modes, for parsing flags. */
export const SPOOL_MODES: readonly SpoolMode[] = ["auto", "always", "never"];

/** Where this download's bytes go now: "probe" is "auto" before it has chosen. */
type Route = "probe" | "spool" | "stream";

/** How long "auto" watches a body before choosing (from its headers' arrival). */
export const SPOOL_PROBE_MS = 250;

/** The rate (bytes/s, of all downloads together) at or above which "auto" keeps spooling. */
export const SPOOL_MIN_RATE = 32 * 1024 * 1024;

/** Fully resolved settings for {@link downloadPackfile}. */
export interface DownloadSettings {
  gitDir: string;
  retries: number;
  timeoutMs: number;
  backoffMs: number;
  /** Request headers for a URI. */
  headersFor: (uri: string) => Record<string, string>;
  indexPackArgs: string[];
  spool: SpoolMode;
  /** The summed rate (bytes/s) at which "auto" keeps spooling (see `fetchPackfiles`). */
  spoolMinRate: number;
  /** Bytes received so far by every download sharing these settings (one fetch), for "auto". */
  arrivals: { total: number };
  /** Whether staged packs are flushed to disk (`core.fsync`; see fsync_config.ts), read once. */
  fsyncPacks: () => Promise<boolean>;
  onProgress: (event: ProgressEvent) => void;
  /** Object counts of the pack's index-pack as it goes (see `fetchPackfiles`). */
  onObjects?: (hash: string, counts: ObjectCounts) => void;
  fetch: typeof fetch;
}

/**
 * Downloads, indexes, verifies and installs one pack. Rejects with {@link VerificationError} on a
 * checksum mismatch, {@link PackfileDownloadError} once every attempt failed, or the signal's
 * reason when aborted; in every case nothing staged is left behind and index-pack is reaped.
 */
export function downloadPackfile(
  entry: PackfileUri,
  settings: DownloadSettings,
  signal: AbortSignal,
): Promise<PackfileResult> {
  return new PackfileDownload(entry, settings, signal).run();
}

class PackfileDownload {
  #sink: PackSink | null = null;
  #received = 0;
  #total: number | undefined;
  /** `--fix-thin` needs `--stdin`, so it always streams. */
  #mode: Route;
  /** When "auto" started watching, and the bytes every download had received by then. */
  #probe: { at: number; all: number } | null = null;

  constructor(
    readonly entry: PackfileUri,
    readonly settings: DownloadSettings,
    readonly signal: AbortSignal,
  ) {
    const fixThin = settings.indexPackArgs.includes("--fix-thin");
    this.#mode = fixThin || settings.spool === "never"
      ? "stream"
      : settings.spool === "always"
      ? "spool"
      : "probe";
  }

  async run(): Promise<PackfileResult> {
    const started = performance.now();
    this.#emit({ type: "start", hash: this.entry.hash, bytes: 0 });
    try {
      for (let attempt = 1;; attempt++) {
        try {
          const packPath = await this.#attempt();
          const seconds = (performance.now() - started) / 1000;
          this.#emit({ type: "done", hash: this.entry.hash, bytes: this.#received, seconds });
          return {
            ...this.entry,
            bytes: this.#received,
            seconds,
            retries: attempt - 1,
            packPath,
            spooled: this.#mode === "spool",
          };
        } catch (error) {
          if (this.signal.aborted) throw this.signal.reason;
          if (error instanceof VerificationError) throw error;
          if (!isRetryable(error) || attempt > this.settings.retries) {
            throw new PackfileDownloadError(this.entry.uri, attempt, error);
          }
          await this.#waitBeforeRetry(attempt + 1, error);
        }
      }
    } finally {
      await this.#sink?.discard();
    }
  }

  /** One request: resumes or restarts, streams the body, then verifies and installs. */
  async #attempt(): Promise<string> {
    const { uri } = this.entry;
    using watchdog = new IdleWatchdog(uri, this.settings.timeoutMs, this.signal);
    try {
      const response = await this.settings.fetch(uri, {
        headers: this.#requestHeaders(),
        signal: watchdog.signal,
      });
      watchdog.touch();
      const plan = planOrDiscard(uri, response, this.#received);
      if (plan.mode === "restart") await this.#restart();
      this.#total = plan.total ?? this.#total;
      if (response.body) await this.#pump(response.body, watchdog);
    } catch (error) {
      throw watchdog.stalled ? new StallError(uri, this.settings.timeoutMs) : error;
    }
    if (this.#total !== undefined && this.#received < this.#total) {
      throw new TruncatedBodyError(uri, this.#received, this.#total);
    }
    return await this.#verifyAndInstall();
  }

  #requestHeaders(): Headers {
    const headers = new Headers(this.settings.headersFor(this.entry.uri));
    headers.set("accept-encoding", "identity");
    if (this.#received > 0) headers.set("range", `bytes=${this.#received}-`);
    return headers;
  }

  /** Drops any partial state and starts a fresh spool or index-pack. */
  async #restart(): Promise<void> {
    await this.#sink?.discard();
    this.#sink = null;
    this.#received = 0;
    this.#total = undefined;
    this.#probe = null;
    const { gitDir, indexPackArgs: args } = this.settings;
    const report = this.settings.onObjects;
    const hash = this.entry.hash;
    const onObjects = report ? (counts: ObjectCounts) => report(hash, counts) : undefined;
    this.#sink = this.#mode === "stream"
      ? PackIndexer.start({ gitDir, args, signal: this.signal, onObjects })
      : await PackSpool.open({
        gitDir,
        args,
        signal: this.signal,
        onObjects,
        fsync: this.settings.fsyncPacks(),
      });
  }

  /**
   * Copies the body into the sink, one chunk at a time (each write waits for the pipe); once the
   * pack is spooled for good, the spool takes the rest of the body itself.
   */
  async #pump(body: ReadableStream<Uint8Array>, watchdog: IdleWatchdog): Promise<void> {
    const reader = body.getReader();
    let finished = false;
    if (this.#mode === "probe") {
      this.#probe ??= { at: performance.now(), all: this.settings.arrivals.total };
    }
    try {
      while (true) {
        const sink = this.#requireSink();
        if (this.#mode === "spool" && sink.pipeFrom) {
          // Spooling for good: the sink takes the rest of the body itself.
          reader.releaseLock();
          finished = true;
          await sink.pipeFrom(body, (bytes) => this.#grew(bytes, watchdog));
          return;
        }
        const { done, value } = await reader.read();
        if (done) {
          finished = true;
          // A body that ended while "auto" watched it was fast enough: it stays spooled.
          if (this.#mode === "probe") this.#mode = "spool";
          return;
        }
        watchdog.touch();
        await sink.write(value);
        watchdog.touch();
        this.#received += value.byteLength;
        this.settings.arrivals.total += value.byteLength;
        if (this.#mode === "probe") await this.#choose();
        this.#emit({
          type: "progress",
          hash: this.entry.hash,
          bytes: this.#received,
          total: this.#total,
        });
      }
    } finally {
      if (!finished) await cancelQuietly(reader);
      reader.releaseLock();
    }
  }

  /** A sink taking a body itself has `bytes` of the pack now. */
  #grew(bytes: number, watchdog: IdleWatchdog): void {
    const added = bytes - this.#received;
    if (added <= 0) return;
    watchdog.touch();
    this.#received = bytes;
    this.settings.arrivals.total += added;
    this.#emit({ type: "progress", hash: this.entry.hash, bytes, total: this.#total });
  }

  /** Once "auto" has watched long enough: keeps spooling on a fast link, else streams. */
  async #choose(): Promise<void> {
    const probe = this.#probe!;
    const elapsed = performance.now() - probe.at;
    const arrived = this.settings.arrivals.total - probe.all;
    // At the threshold over the window (or, once the window has passed, over all the time
    // watched). Before the window ends this holds only once the window's worth has come, and the
    // verdict at its end could not be another, so the spool takes over at once.
    if (arrived >= this.settings.spoolMinRate * Math.max(elapsed, SPOOL_PROBE_MS) / 1000) {
      this.#mode = "spool";
      return;
    }
    if (elapsed < SPOOL_PROBE_MS) return;
    this.#mode = "stream";
    const spool = this.#sink as PackSpool;
    this.#sink = null; // if the hand-over fails, neither is left to resume or discard
    this.#sink = await spool.toStream();
  }

  async #verifyAndInstall(): Promise<string> {
    const sink = this.#requireSink();
    const actual = await sink.finish();
    if (actual !== this.entry.hash.toLowerCase()) {
      await sink.discard();
      this.#sink = null;
      throw new VerificationError(this.entry.uri, this.entry.hash, actual);
    }
    const packPath = await sink.install();
    this.#sink = null;
    return packPath;
  }

  /** Decides between resuming and starting over, reports the retry and backs off. */
  async #waitBeforeRetry(nextAttempt: number, error: unknown): Promise<void> {
    const resume = this.#sink?.resumable === true && this.#received > 0 &&
      canResumeAfter(error);
    if (!resume) {
      await this.#sink?.discard();
      this.#sink = null;
      this.#received = 0;
    }
    const delayMs = backoffDelay(nextAttempt - 1, this.settings.backoffMs);
    this.#emit({
      type: "retry",
      hash: this.entry.hash,
      bytes: this.#received,
      total: this.#total,
      attempt: nextAttempt,
      delayMs,
      resume,
      reason: error instanceof Error ? error.message : String(error),
    });
    await sleep(delayMs, this.signal);
  }

  #requireSink(): PackSink {
    if (this.#sink === null) throw new Error("internal: no spool or index-pack for this download");
    return this.#sink;
  }

  #emit(event: ProgressEvent): void {
    this.settings.onProgress(event);
  }
}

/** Plans the response; on rejection the body is released before the error propagates. */
function planOrDiscard(uri: string, response: Response, received: number) {
  try {
    return planResponse(uri, response, received);
  } catch (error) {
    if (response.body) void cancelQuietly(response.body.getReader());
    throw error;
  }
}

/**
 * Cancels a body we are abandoning. The transfer has already failed or been rejected for a reason
 * we are reporting; a failure to cancel it adds nothing, so it is deliberately not propagated.
 */
async function cancelQuietly(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
  try {
    await reader.cancel();
  } catch {
    // See above: the original error is the one worth reporting.
  }
}

/** Errors after which another attempt can help. */
function isRetryable(error: unknown): boolean {
  if (error instanceof HttpStatusError) return error.status !== 401 && error.status !== 403;
  if (error instanceof Deno.errors.NotFound) return false; // git itself is missing
  return true;
}

/** Whether the bytes already fed to index-pack can be kept after `error`. */
function canResumeAfter(error: unknown): boolean {
  return !(error instanceof IndexPackError || error instanceof RangeMismatchError);
}
