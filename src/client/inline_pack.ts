/** Indexing the pack that arrives inline in a `fetch` response. */
import { GitFormatError } from "../git/errors.ts";
import { NetworkError } from "./errors.ts";
import { PackIndexer } from "./index_pack.ts";
import type { ObjectCounts } from "./index_progress.ts";

/**
 * Streams the fetch response's pack into `index-pack --fix-thin`; returns its size. A transport
 * failure while reading becomes a {@link NetworkError}; malformed wire data keeps its own type.
 */
export async function indexInlinePack(
  pack: ReadableStream<Uint8Array>,
  gitDir: string,
  url: string,
  progress:
    | { inline(bytes: number): void; objects?(key: string, counts: ObjectCounts): void }
    | undefined,
  signal: AbortSignal | undefined,
  options: { promisor?: boolean } = {},
): Promise<number> {
  const report = progress?.objects?.bind(progress);
  const indexer = PackIndexer.start({
    gitDir,
    args: ["--fix-thin"],
    signal,
    onObjects: report ? (counts) => report("inline", counts) : undefined,
  });
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
    const packPath = await indexer.install();
    // A partial clone's pack comes from the promisor remote: git then expects what it lacks.
    if (options.promisor) await Deno.writeTextFile(packPath.replace(/\.pack$/, ".promisor"), "");
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
