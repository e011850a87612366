/**
 * Real-git pack fixtures for the pack reader/writer/splitter tests: a repository built with
 * fast-import (long history of one file for deep delta chains, incompressible and empty blobs,
 * ~2 MB text and random blobs, annotated tags), packs made by `git pack-objects`, and the
 * ground truth `git verify-pack -v` reports.
 */

import { git, gitBytes } from "../support/git.ts";
import { concatBytes, seededRandom } from "../support/streams.ts";

const encoder = new TextEncoder();

/** One object line of `git verify-pack -v`. */
export interface VerifiedObject {
  id: string;
  type: string;
  size: number;
  sizeInPack: number;
  offset: number;
  depth?: number;
  baseId?: string;
}

/** Random bytes from a seeded generator (incompressible, reproducible). */
export function randomBytes(length: number, seed: number): Uint8Array {
  const rand = seededRandom(seed);
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i += 4) {
    const v = (rand() * 4294967296) >>> 0;
    out[i] = v;
    out[i + 1] = v >>> 8;
    out[i + 2] = v >>> 16;
    out[i + 3] = v >>> 24;
  }
  return out;
}

/** Readable pseudo-text of roughly `length` bytes. */
export function randomText(length: number, seed: number): string {
  const rand = seededRandom(seed);
  const words = ["pack", "delta", "object", "tree", "commit", "blob", "zlib", "offset", "edge"];
  const lines: string[] = [];
  let size = 0;
  while (size < length) {
    const n = 3 + Math.floor(rand() * 9);
    const line = Array.from({ length: n }, () => words[Math.floor(rand() * words.length)])
      .join(" ") + ` ${Math.floor(rand() * 100000)}`;
    lines.push(line);
    size += line.length + 1;
  }
  return lines.join("\n") + "\n";
}

function data(bytes: Uint8Array | string): Uint8Array {
  const body = typeof bytes === "string" ? encoder.encode(bytes) : bytes;
  return concatBytes([encoder.encode(`data ${body.length}\n`), body, encoder.encode("\n")]);
}

/** Options for {@link buildRepo}. */
export interface RepoOptions {
  /** Commits editing the same text file (default 120). */
  commits?: number;
  /** Add the ~2 MB blobs (default true). */
  big?: boolean;
  /** `sha256` for a SHA-256 repository (default `sha1`). */
  objectFormat?: "sha1" | "sha256";
}

/**
 * Creates a repository in `dir` via fast-import. Tag `small` points at commit 20, before any
 * big blob, for a small pack.
 */
export async function buildRepo(dir: string, options: RepoOptions = {}): Promise<void> {
  const commits = options.commits ?? 120;
  await git(["init", "-q", "-b", "main", `--object-format=${options.objectFormat ?? "sha1"}`, dir]);
  const pieces: Uint8Array[] = [];
  const lines = randomText(8000, 1).split("\n");
  let time = 1_700_000_000;
  for (let c = 1; c <= commits; c++) {
    // Small edits keep successive versions delta-friendly.
    lines[(c * 37) % lines.length] = `edit ${c} ${randomText(40, c + 100).trim()}`;
    if (c % 10 === 0) lines.push(`appended at ${c}`);
    const files: Uint8Array[] = [
      encoder.encode("M 100644 inline notes.txt\n"),
      data(lines.join("\n")),
    ];
    if (c % 12 === 3) {
      files.push(encoder.encode(`M 100644 inline bin/r${c}.bin\n`));
      files.push(data(randomBytes(1000 + c * 200, c)));
    }
    if (c === 5) files.push(encoder.encode("M 100644 inline empty\n"), data(new Uint8Array(0)));
    if (c === commits - 5 && options.big !== false) {
      files.push(encoder.encode("M 100644 inline big-random.bin\n"), data(randomBytes(2 << 20, 7)));
      files.push(encoder.encode("M 100644 inline big-text.txt\n"), data(randomText(2 << 20, 8)));
    }
    const who = `Pack Test <pack@gitedge.invalid> ${time++} +0000`;
    pieces.push(
      encoder.encode(`commit refs/heads/main\nmark :${c}\nauthor ${who}\ncommitter ${who}\n`),
    );
    pieces.push(data(`commit ${c}\n`));
    if (c > 1) pieces.push(encoder.encode(`from :${c - 1}\n`));
    pieces.push(...files, encoder.encode("\n"));
    if (c === 20 || c % 50 === 0) {
      const name = c === 20 ? "small" : `v${c}`;
      pieces.push(encoder.encode(`tag ${name}\nfrom :${c}\ntagger ${who}\n`));
      pieces.push(data(`release ${name}\n`));
    }
  }
  await git(["fast-import", "--quiet"], { cwd: dir, stdin: concatBytes(pieces) });
}

/** Options for {@link packObjects}. */
export interface PackOptions {
  /** Use OFS_DELTA (default true); false gives REF_DELTA entries. */
  ofsDelta?: boolean;
  /** zlib level (`pack.compression`), default 6. */
  compression?: number;
  /** Revisions to pack (default: all refs). */
  revs?: string[];
}

/** Runs `git pack-objects --stdout` with fresh deltas and compression. */
export async function packObjects(dir: string, options: PackOptions = {}): Promise<Uint8Array> {
  const args = [
    "-c",
    `pack.compression=${options.compression ?? 6}`,
    "pack-objects",
    "--stdout",
    "--revs",
    "--no-reuse-object",
    "--window=50",
    "--depth=50",
    "-q",
  ];
  if (options.ofsDelta ?? true) args.push("--delta-base-offset");
  if (!options.revs) args.push("--all");
  const stdin = encoder.encode((options.revs ?? []).join("\n") + "\n");
  return await gitBytes(args, { cwd: dir, stdin });
}

/**
 * Indexes `pack` (written to `dir/name.pack`) with `git index-pack` and returns the
 * `git verify-pack -v` object lines. Throws if git rejects the pack.
 */
export async function verifyPack(
  dir: string,
  name: string,
  pack: Uint8Array,
): Promise<VerifiedObject[]> {
  const path = `${dir}/${name}.pack`;
  await Deno.writeFile(path, pack);
  await git(["index-pack", path], { cwd: dir });
  const out = await git(["verify-pack", "-v", path.replace(/\.pack$/, ".idx")], { cwd: dir });
  const objects: VerifiedObject[] = [];
  for (const line of out.split("\n")) {
    const f = line.trim().split(/\s+/);
    if (!/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(f[0])) continue;
    objects.push({
      id: f[0],
      type: f[1],
      size: Number(f[2]),
      sizeInPack: Number(f[3]),
      offset: Number(f[4]),
      depth: f[5] === undefined ? undefined : Number(f[5]),
      baseId: f[6],
    });
  }
  return objects.sort((a, b) => a.offset - b.offset);
}

/**
 * Writes `count` distinct tiny blobs with fast-import into a new repository at `dir` and
 * returns the path of the pack fast-import wrote (no pack-objects pass: quick at 200k).
 */
export async function tinyBlobPack(dir: string, count: number): Promise<string> {
  await git(["init", "-q", dir]);
  const parts: string[] = [];
  for (let i = 0; i < count; i++) {
    const body = `blob ${i}\n`;
    parts.push(`blob\ndata ${body.length}\n${body}\n`);
  }
  await git(["fast-import", "--quiet"], { cwd: dir, stdin: encoder.encode(parts.join("")) });
  const packDir = `${dir}/.git/objects/pack`;
  for await (const file of Deno.readDir(packDir)) {
    if (file.name.endsWith(".pack")) return `${packDir}/${file.name}`;
  }
  throw new Error(`fast-import wrote no pack in ${packDir}`);
}
