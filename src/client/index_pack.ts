/**
 * Streaming a pack into `git index-pack --stdin` while it downloads, so fetching and indexing
 * overlap and no temporary copy of the pack is kept. The pack is staged under a unique name in
 * `objects/pack/` and only renamed to `pack-<hash>.{pack,idx}` once the caller has checked the
 * hash; every failure path removes the staged files and reaps the child process.
 */
import { isObjectId } from "../git/object_id.ts";
import { IndexPackError } from "./errors.ts";
import { type ObjectCounts, readIndexPackStderr } from "./index_progress.ts";

/**
 * Where a downloaded pack goes until it is checked: {@link PackIndexer} (streamed into
 * index-pack) and `PackSpool` (a file first, indexed once complete) both stage it and install it
 * the same way.
 */
export interface PackSink {
  /** Takes the next bytes of the pack; resolves once they are taken (backpressure). */
  write(chunk: Uint8Array): Promise<void>;
  /** Ends the input, indexes, and resolves with the pack's checksum (hex); nothing installed. */
  finish(): Promise<string>;
  /** Moves the staged pack and index into place; returns the pack's final path. */
  install(): Promise<string>;
  /** Stops any index-pack, waits for it and removes anything staged. Idempotent. */
  discard(): Promise<void>;
  /** Whether it still takes bytes where they left off (a retry may resume with `Range`). */
  readonly resumable: boolean;
  /**
   * Takes the rest of a body itself, without its chunks passing through the caller; `grown` is
   * told the bytes taken so far as they grow. Only sinks that can do it natively have it.
   */
  pipeFrom?(body: ReadableStream<Uint8Array>, grown: (bytes: number) => void): Promise<void>;
}

/** Where a pack and its index are staged before they are installed. */
export interface StagedFiles {
  packDir: string;
  pack: string;
  idx: string;
}

/** A staged pack's file names, unique in `objects/pack`. */
export function stagedPaths(gitDir: string): StagedFiles {
  const packDir = `${gitDir}/objects/pack`;
  const stem = `${packDir}/tmp_gitedge_${crypto.randomUUID()}`;
  return { packDir, pack: `${stem}.pack`, idx: `${stem}.idx` };
}

/**
 * Renames a staged pack and index to `pack-<hash>.pack` / `.idx`, index last (as git does, so
 * readers never see an index without its pack). Returns the final pack path.
 */
export async function installStaged(
  staged: StagedFiles,
  hash: string,
): Promise<string> {
  const packPath = `${staged.packDir}/pack-${hash}.pack`;
  await Deno.rename(staged.pack, packPath);
  await Deno.rename(staged.idx, `${staged.packDir}/pack-${hash}.idx`);
  return packPath;
}

/** Removes whatever of a staged pack and index exists. */
export async function removeStaged(staged: Pick<StagedFiles, "pack" | "idx">): Promise<void> {
  await Promise.all([removeIfPresent(staged.pack), removeIfPresent(staged.idx)]);
}

/** Options for {@link PackIndexer.start}. */
export interface PackIndexerOptions {
  /** The repository's git directory (`GIT_DIR`). */
  gitDir: string;
  /** Extra `index-pack` arguments, e.g. `--fix-thin` or `--strict`. */
  args?: string[];
  /** Kills index-pack when aborted (a clone stopped by a signal leaves no process behind). */
  signal?: AbortSignal;
  /** Object counts as index-pack goes (runs it with `-v`). */
  onObjects?: (counts: ObjectCounts) => void;
}

type State = "running" | "indexed" | "installed" | "discarded";

/** One running `git index-pack --stdin` fed by the caller. */
export class PackIndexer implements PackSink {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #stdout: Promise<string>;
  readonly #stderr: Promise<string>;
  readonly #staged: StagedFiles;
  #exited = false;
  #state: State = "running";
  #hash: string | null = null;

  private constructor(options: PackIndexerOptions) {
    this.#staged = stagedPaths(options.gitDir);
    const args = [
      "index-pack",
      "--stdin",
      ...(options.onObjects ? ["-v"] : []),
      ...(options.args ?? []),
      "-o",
      this.#staged.idx,
      this.#staged.pack,
    ];
    this.#child = new Deno.Command("git", {
      args,
      env: { GIT_DIR: options.gitDir },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#child.status.then(() => (this.#exited = true));
    const signal = options.signal;
    if (signal) {
      const kill = () => {
        if (!this.#exited) {
          try {
            this.#child.kill("SIGKILL");
          } catch { /* it exited meanwhile */ }
        }
      };
      if (signal.aborted) kill();
      else {
        signal.addEventListener("abort", kill, { once: true });
        this.#child.status.then(() => signal.removeEventListener("abort", kill));
      }
    }
    this.#writer = this.#child.stdin.getWriter();
    this.#stdout = new Response(this.#child.stdout).text();
    this.#stderr = options.onObjects
      ? readIndexPackStderr(this.#child.stderr, options.onObjects)
      : new Response(this.#child.stderr).text();
  }

  /** Still running: a retry may go on feeding it (index-pack errors are not resumed anyway). */
  get resumable(): boolean {
    return this.#state === "running";
  }

  /** Starts `git index-pack --stdin` for a repository whose `objects/pack` directory exists. */
  static start(options: PackIndexerOptions): PackIndexer {
    return new PackIndexer(options);
  }

  /**
   * Feeds the next bytes of the pack, resolving once the pipe has taken them (backpressure). If
   * index-pack has given up on the stream, rejects with its {@link IndexPackError}.
   */
  async write(chunk: Uint8Array): Promise<void> {
    this.#expect("running");
    try {
      await this.#writer.ready;
      await this.#writer.write(chunk);
    } catch (error) {
      throw await this.#failure(error);
    }
  }

  /**
   * Ends the input and waits for index-pack. Resolves with the pack's checksum (hex) as
   * index-pack reports it; the pack stays staged until {@link install} or {@link discard}.
   */
  async finish(): Promise<string> {
    this.#expect("running");
    try {
      await this.#writer.close();
    } catch (error) {
      throw await this.#failure(error);
    }
    const status = await this.#child.status;
    if (!status.success) throw await this.#failure(undefined);
    const stdout = await this.#stdout;
    const match = /^(?:pack|keep)\t(\S*)\n?$/.exec(stdout);
    if (!match || !isObjectId(match[1])) {
      await this.discard();
      throw new IndexPackError(status.code, `unexpected output ${JSON.stringify(stdout)}`);
    }
    this.#state = "indexed";
    this.#hash = match[1];
    return match[1];
  }

  /**
   * Moves the staged pack into place as `pack-<hash>.pack` / `.idx` (index last, as git does, so
   * readers never see an index without its pack). Returns the final pack path.
   */
  async install(): Promise<string> {
    this.#expect("indexed");
    let packPath: string;
    try {
      packPath = await installStaged(this.#staged, this.#hash!);
    } catch (error) {
      await this.discard();
      throw error;
    }
    this.#state = "installed";
    return packPath;
  }

  /** Kills index-pack if it still runs, waits for it, and removes anything staged. Idempotent. */
  async discard(): Promise<void> {
    if (this.#state === "installed" || this.#state === "discarded") return;
    this.#state = "discarded";
    if (!this.#exited) {
      try {
        this.#child.kill("SIGKILL");
      } catch (error) {
        // The child may exit between the check and the kill; anything else is real.
        if (!this.#exited) throw error;
      }
    }
    await this.#writer.abort().catch(() => {/* the pipe is already broken: nothing to abort */});
    await this.#child.status;
    await Promise.all([this.#stdout, this.#stderr]);
    await removeStaged(this.#staged);
  }

  /** Reaps the child, removes staged files and builds the error describing why it stopped. */
  async #failure(cause: unknown): Promise<IndexPackError> {
    const status = await this.#child.status;
    const stderr = await this.#stderr;
    await this.discard();
    return new IndexPackError(status.code, stderr, cause === undefined ? undefined : { cause });
  }

  #expect(state: State): void {
    if (this.#state !== state) {
      throw new Error(`PackIndexer is ${this.#state}, expected ${state}`);
    }
  }
}

/** Removes a file, treating "already gone" as success. */
export async function removeIfPresent(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}
