/**
 * A pack written to a staged file as it downloads, then indexed in place by
 * `git index-pack <file>` once it is complete (and flushed to disk, as index-pack --stdin would).
 * On a fast link this beats streaming into
 * `index-pack --stdin`: index-pack reads a pipe 4 KiB at a time, so every 4 KiB wakes the writer,
 * and it writes the pack a second time; from a file it reads what is already in the page cache and
 * writes only the index. On a slow link streaming wins (indexing overlaps the transfer), so a
 * spool can hand its bytes over to a streaming {@link PackIndexer} part way ({@link toStream}).
 */
import { isObjectId } from "../git/object_id.ts";
import { IndexPackError } from "./errors.ts";
import { type ObjectCounts, readIndexPackStderr } from "./index_progress.ts";
import {
  installStaged,
  PackIndexer,
  type PackSink,
  removeIfPresent,
  removeStaged,
  type StagedFiles,
  stagedPaths,
} from "./index_pack.ts";

/** Options for {@link PackSpool.open}. */
export interface PackSpoolOptions {
  /** The repository's git directory (`GIT_DIR`). */
  gitDir: string;
  /** Extra `index-pack` arguments (not `--fix-thin`: that needs `--stdin`). */
  args?: string[];
  /** Kills a running index-pack when aborted. */
  signal?: AbortSignal;
  /** Object counts as index-pack goes (runs it with `-v`). */
  onObjects?: (counts: ObjectCounts) => void;
  /**
   * Whether to flush the pack to disk before it is installed, as `index-pack --stdin` does unless
   * `core.fsync` leaves packs out (see fsync_config.ts). Default: flush.
   */
  fsync?: boolean | Promise<boolean>;
}

type State =
  | "writing"
  | "broken"
  | "indexing"
  | "indexed"
  | "installed"
  | "handed-over"
  | "discarded";

/** How many bytes spooled since the last early flush start another (see `#flushEarly`). */
const EARLY_FLUSH_BYTES = 4 << 20;

/** How often a piped body's progress is read off the file's size (ms). */
export const PIPE_POLL_MS = 100;

/** Bytes read back per write when a spool is handed to index-pack's stdin. */
const REPLAY_CHUNK = 256 * 1024;

/** One pack staged in a file, indexed by {@link finish}. */
export class PackSpool implements PackSink {
  readonly #options: PackSpoolOptions;
  readonly #staged: StagedFiles;
  readonly #file: Deno.FsFile;
  #state: State = "writing";
  #hash: string | null = null;
  #child: Deno.ChildProcess | null = null;
  #bytes = 0;
  /** Whether the pack is flushed to disk; the bytes when the last early flush started. */
  readonly #flush: boolean;
  #flushedAt = 0;
  #early: Promise<unknown> | null = null;

  private constructor(
    options: PackSpoolOptions,
    staged: StagedFiles,
    file: Deno.FsFile,
    flush: boolean,
  ) {
    this.#options = options;
    this.#staged = staged;
    this.#file = file;
    this.#flush = flush;
  }

  /** Creates the staged file in `objects/pack` (which must exist). */
  static async open(options: PackSpoolOptions): Promise<PackSpool> {
    const flush = await (options.fsync ?? true);
    const staged = stagedPaths(options.gitDir);
    const file = await Deno.open(staged.pack, { write: true, createNew: true, mode: 0o444 });
    return new PackSpool(options, staged, file, flush);
  }

  /** Bytes written so far. */
  get bytes(): number {
    return this.#bytes;
  }

  /** False once a write failed part way (the file no longer ends at {@link bytes}) or it ended. */
  get resumable(): boolean {
    return this.#state === "writing";
  }

  /** Appends the next bytes of the pack to the staged file. */
  async write(chunk: Uint8Array): Promise<void> {
    this.#expect("writing");
    try {
      let at = 0;
      while (at < chunk.byteLength) at += await this.#file.write(chunk.subarray(at));
    } catch (error) {
      this.#state = "broken";
      await this.#early;
      this.#file.close();
      throw error;
    }
    this.#bytes += chunk.byteLength;
    this.#flushEarly();
  }

  /**
   * Appends the rest of `body` to the staged file, the runtime copying it without this code
   * handling each chunk: Deno pipes a fetch body to a file natively (8 parallel 16 MiB bodies
   * took ~0.2 CPU-s that way against ~0.4 through {@link write}). `grown` is told the file's
   * size as it grows, read every {@link PIPE_POLL_MS} and once at the end. A failure of the body
   * or of the file rejects; what reached the file is a prefix of the body either way (writes are
   * in order), so the spool stays resumable from its size.
   */
  async pipeFrom(
    body: ReadableStream<Uint8Array>,
    grown: (bytes: number) => void,
  ): Promise<void> {
    this.#expect("writing");
    const file = this.#file;
    const observe = async () => {
      const { size } = await file.stat();
      if (size <= this.#bytes) return;
      this.#bytes = size;
      this.#flushEarly();
      grown(size);
    };
    let polling: Promise<void> | null = null;
    const timer = setInterval(() => {
      polling ??= observe().catch(() => {/* the last look reports */}).finally(() => {
        polling = null;
      });
    }, PIPE_POLL_MS);
    const piped = await body.pipeTo(file.writable, { preventClose: true, preventAbort: true })
      .then(() => null, (error: unknown) => ({ error }));
    clearInterval(timer);
    await polling;
    try {
      await observe();
    } catch (error) {
      this.#state = "broken";
      await this.#early;
      file.close();
      throw error;
    }
    if (piped) throw piped.error;
  }

  /**
   * Starts writing back what is spooled so far, every {@link EARLY_FLUSH_BYTES}, while the rest
   * downloads: the flush before index-pack then has only the tail left (the kernel would
   * otherwise hold it all in the page cache until asked).
   */
  #flushEarly(): void {
    if (!this.#flush || this.#early || this.#bytes - this.#flushedAt < EARLY_FLUSH_BYTES) return;
    this.#flushedAt = this.#bytes;
    this.#early = this.#file.syncData().catch(() => {/* the flush in finish reports */}).finally(
      () => (this.#early = null),
    );
  }

  /**
   * Closes the file and runs `git index-pack -o <idx> <pack>` on it. Resolves with the pack's
   * checksum as index-pack reports it (index-pack also checks the pack's own trailer); the pack
   * stays staged until {@link install} or {@link discard}.
   */
  async finish(): Promise<string> {
    this.#expect("writing");
    this.#state = "indexing";
    // The pack reaches the disk as git's own index-pack --stdin makes sure it does (unless
    // core.fsync leaves packs out; from a file index-pack leaves that to its caller): flushed
    // while index-pack reads it from the page cache, and installed only once both are done.
    const file = this.#file;
    await this.#early;
    const synced = (this.#flush ? file.syncData() : Promise.resolve()).then(
      () => null,
      (error: unknown) => error,
    ).finally(() => file.close());
    const signal = this.#options.signal;
    if (signal?.aborted) {
      await synced;
      await this.discard();
      throw signal.reason;
    }
    const child = new Deno.Command("git", {
      args: [
        "index-pack",
        ...(this.#options.onObjects ? ["-v"] : []),
        ...(this.#options.args ?? []),
        "-o",
        this.#staged.idx,
        this.#staged.pack,
      ],
      env: { GIT_DIR: this.#options.gitDir },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#child = child;
    const kill = () => killQuietly(child);
    signal?.addEventListener("abort", kill, { once: true });
    const onObjects = this.#options.onObjects;
    const stderrText = onObjects
      ? readIndexPackStderr(child.stderr, onObjects)
      : new Response(child.stderr).text();
    const stdoutText = new Response(child.stdout).text();
    let output: { success: boolean; code: number; stdout: string; stderr: string };
    try {
      const status = await child.status;
      output = { ...status, stdout: await stdoutText, stderr: await stderrText };
    } finally {
      signal?.removeEventListener("abort", kill);
      this.#child = null;
    }
    const syncError = await synced;
    if (syncError !== null && !signal?.aborted) {
      await this.discard();
      throw syncError;
    }
    if (signal?.aborted || this.#state !== "indexing") {
      await this.discard();
      throw signal?.reason ?? new Error("PackSpool was discarded while indexing");
    }
    const stdout = output.stdout;
    if (!output.success) {
      await this.discard();
      throw new IndexPackError(output.code, output.stderr);
    }
    // From a file (not --stdin) index-pack prints the bare checksum.
    const match = /^(\S*)\n?$/.exec(stdout);
    if (!match || !isObjectId(match[1])) {
      await this.discard();
      throw new IndexPackError(output.code, `unexpected output ${JSON.stringify(stdout)}`);
    }
    this.#state = "indexed";
    this.#hash = match[1];
    return match[1];
  }

  /** Moves the staged pack and index into place as `pack-<hash>.{pack,idx}`, index last. */
  async install(): Promise<string> {
    this.#expect("indexed");
    try {
      const packPath = await installStaged(this.#staged, this.#hash!);
      this.#state = "installed";
      return packPath;
    } catch (error) {
      await this.discard();
      throw error;
    }
  }

  /**
   * Starts a streaming `index-pack --stdin`, feeds it every byte spooled so far and removes the
   * spool; the caller goes on writing to the returned indexer. On failure both are gone.
   */
  async toStream(args: string[] = this.#options.args ?? []): Promise<PackIndexer> {
    this.#expect("writing");
    this.#state = "handed-over";
    await this.#early;
    this.#file.close();
    const indexer = PackIndexer.start({
      gitDir: this.#options.gitDir,
      args,
      signal: this.#options.signal,
      onObjects: this.#options.onObjects,
    });
    try {
      using file = await Deno.open(this.#staged.pack, { read: true });
      const buffer = new Uint8Array(REPLAY_CHUNK);
      while (true) {
        const n = await file.read(buffer);
        if (n === null) break;
        // The indexer's pipe holds on to what it is given until written: hand it a copy.
        await indexer.write(buffer.slice(0, n));
      }
    } catch (error) {
      await indexer.discard();
      throw error;
    } finally {
      await removeIfPresent(this.#staged.pack);
    }
    return indexer;
  }

  /** Kills index-pack if it runs and removes the staged files. Idempotent. */
  async discard(): Promise<void> {
    if (this.#state === "installed" || this.#state === "discarded") return;
    const handedOver = this.#state === "handed-over";
    const wasWriting = this.#state === "writing";
    this.#state = "discarded";
    if (handedOver) return;
    if (wasWriting) {
      await this.#early;
      this.#file.close();
    }
    // "broken" closed its file already; "indexing" closes it once flushed.
    const child = this.#child;
    if (child) {
      killQuietly(child);
      await child.status;
    }
    await removeStaged(this.#staged);
  }

  #expect(state: State): void {
    if (this.#state !== state) throw new Error(`PackSpool is ${this.#state}, expected ${state}`);
  }
}

/** Kills a child that may already have exited. */
function killQuietly(child: Deno.ChildProcess): void {
  try {
    child.kill("SIGKILL");
  } catch {
    // Already exited: its status says how.
  }
}
