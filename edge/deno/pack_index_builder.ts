/**
 * Snapshot pack indexes on the Deno server (`--pack-indexes`): `git index-pack` reads the pack
 * where the filesystem store keeps it and writes its `.idx` to a temporary file, which goes into
 * the store with an ordinary (atomic) put.
 */
import type { PackIndexBuilder } from "../../src/proxy/snapshots/snapshot.ts";
import type { FsPackStore } from "./fs_store.ts";

/** Thrown when `git` cannot be run: the server refuses to start with indexes on. */
export class GitMissingError extends Error {
  override name = "GitMissingError";
}

/** Resolves when `git` runs here; otherwise throws {@link GitMissingError}. */
export async function requireGit(git = "git"): Promise<void> {
  try {
    const { success } = await new Deno.Command(git, {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    }).output();
    if (success) return;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound || error instanceof Deno.errors.PermissionDenied)) {
      throw error;
    }
  }
  throw new GitMissingError(
    "--pack-indexes needs git (it runs `git index-pack`), and git cannot be run here: " +
      "install git or turn --pack-indexes off",
  );
}

/** Options of {@link gitPackIndexBuilder}. */
export interface GitPackIndexOptions {
  /** The git to run (default `git` from `PATH`). */
  git?: string;
  /**
   * How long one index may take: this many ms plus {@link PER_MIB_MS} per MiB of pack (default
   * 60 s). Beyond, index-pack is killed and the build fails, rather than holding the
   * repository's single build forever.
   */
  timeoutMs?: number;
}

/** Time allowed per MiB of pack on top of the base timeout (index-pack does ≈ 20 MiB/s here). */
export const PER_MIB_MS = 1000;

/** The index builder for packs of `store`. */
export function gitPackIndexBuilder(
  store: FsPackStore,
  opts: GitPackIndexOptions = {},
): PackIndexBuilder {
  const git = opts.git ?? "git";
  const baseMs = opts.timeoutMs ?? 60_000;
  return async (packKey, indexKey, objectFormat) => {
    const dir = await Deno.makeTempDir({ prefix: "gitedge-idx-" });
    try {
      const idx = `${dir}/pack.idx`;
      const size = (await store.head(packKey))?.size ?? 0;
      const limitMs = baseMs + PER_MIB_MS * Math.ceil(size / (1 << 20));
      const signal = AbortSignal.timeout(limitMs);
      const { success, stderr } = await new Deno.Command(git, {
        // No repository needed: index-pack reads the pack file and writes only `-o`
        // (`--no-rev-index`: no `.rev` beside the stored pack).
        args: [
          "index-pack",
          `--object-format=${objectFormat}`,
          "--no-rev-index",
          "-o",
          idx,
          store.pathOf(packKey),
        ],
        cwd: dir,
        env: { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
        stdin: "null",
        stdout: "null",
        stderr: "piped",
        signal,
      }).output();
      if (signal.aborted) {
        throw new Error(`git index-pack of ${packKey} took over ${limitMs} ms; killed`);
      }
      if (!success) {
        const message = new TextDecoder().decode(stderr).trim();
        throw new Error(`git index-pack of ${packKey} failed: ${message}`);
      }
      const file = await Deno.open(idx, { read: true });
      await store.put(indexKey, file.readable);
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  };
}
