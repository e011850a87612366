/** Writing `git fast-import` streams and running fast-import with backpressure. */
import { spawnGit } from "./git.ts";

/** One piece of a fast-import stream; strings are encoded as UTF-8. */
export type StreamPiece = string | Uint8Array;

/** A file change in a commit: new content at `path` (regular file). */
export interface FileChange {
  path: string;
  /** The content, or a function making it when the stream reaches it (keeps big blobs lazy). */
  data: StreamPiece | (() => StreamPiece);
}

/** Identity and time used for commits and tags (seconds since epoch, UTC). */
export interface Signature {
  name: string;
  email: string;
  time: number;
}

/** A commit for {@link commitCommand}. */
export interface CommitSpec {
  ref: string;
  mark: number;
  /** First parent: `:mark`, an object id or a ref; omitted for a root commit or to continue `ref`. */
  from?: string;
  /** Further parents. */
  merges?: string[];
  author: Signature;
  message: string;
  files: FileChange[];
}

/** fast-import exited non-zero. */
export class FastImportError extends Error {
  override name = "FastImportError";
  constructor(readonly code: number, readonly stderr: string) {
    super(`git fast-import exited with ${code}: ${stderr.trim()}`);
  }
}

const encoder = new TextEncoder();

/** `data` command: exact byte count, then the bytes. */
export function* dataCommand(data: StreamPiece): Generator<Uint8Array> {
  const bytes = typeof data === "string" ? encoder.encode(data) : data;
  yield encoder.encode(`data ${bytes.byteLength}\n`);
  yield bytes;
  yield encoder.encode("\n");
}

/** A `commit` command with inline file contents. */
export function* commitCommand(c: CommitSpec): Generator<Uint8Array> {
  const who = `${c.author.name} <${c.author.email}> ${c.author.time} +0000`;
  yield encoder.encode(`commit ${c.ref}\nmark :${c.mark}\nauthor ${who}\ncommitter ${who}\n`);
  yield* dataCommand(c.message);
  if (c.from) yield encoder.encode(`from ${c.from}\n`);
  for (const m of c.merges ?? []) yield encoder.encode(`merge ${m}\n`);
  for (const f of c.files) {
    yield encoder.encode(`M 100644 inline ${f.path}\n`);
    yield* dataCommand(typeof f.data === "function" ? f.data() : f.data);
  }
  yield encoder.encode("\n");
}

/** An annotated `tag` command. */
export function* tagCommand(
  name: string,
  from: string,
  tagger: Signature,
  message: string,
): Generator<Uint8Array> {
  const who = `${tagger.name} <${tagger.email}> ${tagger.time} +0000`;
  yield encoder.encode(`tag ${name}\nfrom ${from}\ntagger ${who}\n`);
  yield* dataCommand(message);
}

/** A `blob` command with a mark. */
export function* blobCommand(mark: number, data: StreamPiece): Generator<Uint8Array> {
  yield encoder.encode(`blob\nmark :${mark}\n`);
  yield* dataCommand(data);
}

/** Options for {@link runFastImport}. */
export interface FastImportOptions {
  /** Write the mark → object id table here. */
  exportMarks?: string;
  /** Blobs at least this big are stored without trying deltas (default 128 KiB). */
  bigFileThreshold?: number;
  /** zlib level for the pack (default 0: fixture blobs are mostly random and would not shrink). */
  compression?: number;
}

/**
 * Feeds `commands` to `git fast-import` in `repo` (pulled lazily, so big streams are never held in
 * memory) and waits for it; throws {@link FastImportError} on failure.
 */
export async function runFastImport(
  repo: string,
  commands: Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
  opts: FastImportOptions = {},
): Promise<void> {
  // Fixture blobs are mostly random: zlib level 0 and no delta attempts on big blobs keep
  // generation fast (random data would not shrink anyway).
  const threshold = opts.bigFileThreshold ?? 128 * 1024;
  const level = opts.compression ?? 0;
  const args = [
    "-c",
    `core.compression=${level}`,
    "-c",
    `pack.compression=${level}`,
    "-c",
    "fastimport.unpackLimit=0", // always keep the pack, as a served repository would have
    "fast-import",
    "--quiet",
    "--done",
    `--big-file-threshold=${threshold}`,
  ];
  if (opts.exportMarks) args.push(`--export-marks=${opts.exportMarks}`);
  const child = spawnGit(args, { cwd: repo, stdin: "piped", stdout: "null" });
  const stderr = new Response(child.stderr).text();
  async function* withDone() {
    yield* commands;
    yield encoder.encode("done\n");
  }
  const feeding = ReadableStream.from(withDone()).pipeTo(child.stdin);
  const [fed, status, text] = await Promise.allSettled([feeding, child.status, stderr]);
  const err = text.status === "fulfilled" ? text.value : String(text.reason);
  // A failing command generator is the root cause; a broken pipe just means fast-import died.
  if (fed.status === "rejected" && !(fed.reason instanceof Deno.errors.BrokenPipe)) {
    throw fed.reason;
  }
  if (status.status === "rejected") throw status.reason;
  if (!status.value.success) throw new FastImportError(status.value.code, err);
}

/** Parses an exported marks file into mark → object id. */
export async function readMarks(path: string): Promise<Map<number, string>> {
  const marks = new Map<number, string>();
  for (const line of (await Deno.readTextFile(path)).split("\n")) {
    const m = /^:(\d+) ([0-9a-f]{40})$/.exec(line);
    if (m) marks.set(Number(m[1]), m[2]);
  }
  return marks;
}
