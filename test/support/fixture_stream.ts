/**
 * The fast-import stream of a fixture repository: deterministic content for a spec and seed.
 */
import { commitCommand, type FileChange, type Signature, tagCommand } from "./fast_import.ts";
import { SeededRandom } from "./random.ts";

/** What a fixture repository contains. Every field has a small default. */
export interface FixtureSpec {
  /** Commits on main (at least `deltaFileRevisions`). Default 12. */
  commits?: number;
  /** Feature branches forked from main, two commits each. Default 2. */
  branches?: number;
  /** Annotated tags on main. Default 2. */
  tags?: number;
  /** Merge every feature branch back into main. Default true. */
  merges?: boolean;
  /** Total bytes of random (incompressible) blobs. Default 256 KiB. */
  binaryBytes?: number;
  /** Revisions of one large text file, one per commit: deep delta chains. Default 10. */
  deltaFileRevisions?: number;
  /** Approximate pack size: raises the random blob total to this. Default 0. */
  targetBytes?: number;
  /** Seed for all content. Default 1. */
  seed?: number;
}

/** A spec with every default filled in. */
export type ResolvedSpec = Required<FixtureSpec>;

/** Fills in defaults and validates counts. */
export function resolveSpec(spec: FixtureSpec): ResolvedSpec {
  const r: ResolvedSpec = {
    commits: spec.commits ?? 12,
    branches: spec.branches ?? 2,
    tags: spec.tags ?? 2,
    merges: spec.merges ?? true,
    binaryBytes: spec.binaryBytes ?? 256 * 1024,
    deltaFileRevisions: spec.deltaFileRevisions ?? 10,
    targetBytes: spec.targetBytes ?? 0,
    seed: spec.seed ?? 1,
  };
  const counts = [
    "commits",
    "branches",
    "tags",
    "binaryBytes",
    "deltaFileRevisions",
    "targetBytes",
  ] as const;
  for (const key of counts) {
    if (!Number.isInteger(r[key]) || r[key] < 0) {
      throw new RangeError(`fixture spec ${key} must be a non-negative integer, got ${r[key]}`);
    }
  }
  return r;
}

/** Total random blob bytes a resolved spec asks for. */
export function randomBytesTotal(spec: ResolvedSpec): number {
  return Math.max(spec.binaryBytes, spec.targetBytes);
}

/** Commit times start here (2023-11-14T22:13:20Z) and advance a minute per commit. */
export const BASE_TIME = 1_700_000_000;
const BLOB_CHUNK = 1024 * 1024;

/** The author/committer/tagger of every fixture object at `time`. */
export function signature(time: number): Signature {
  return { name: "gitedge fixture", email: "fixture@gitedge.invalid", time };
}

/**
 * Yields the fast-import commands for a fresh repository built from `spec`. Random blobs are made
 * only when the stream reaches them, so memory stays bounded whatever the size.
 */
export function* fixtureStream(spec: ResolvedSpec): Generator<Uint8Array> {
  const text = new SeededRandom(spec.seed);
  const binary = new SeededRandom(spec.seed ^ 0x5eed5eed);
  const mainCount = Math.max(spec.commits, spec.deltaFileRevisions, 1);
  const blobSizes = splitBytes(randomBytesTotal(spec), BLOB_CHUNK);
  const history = new DeltaFile(text);
  let mark = 0;
  const mainMarks: number[] = [];

  for (let i = 0; i < mainCount; i++) {
    const files: FileChange[] = [];
    if (i === 0) files.push({ path: "README.md", data: "# fixture\n\nMade by gitedge tests.\n" });
    files.push({ path: `src/module-${i % 8}.txt`, data: textLines(text, 40) });
    if (i < spec.deltaFileRevisions) files.push({ path: "history.log", data: history.next() });
    blobSizes.forEach((size, k) => {
      if (k % mainCount === i) {
        files.push({
          path: `bin/blob-${k}.bin`,
          data: () => binary.bytes(size),
        });
      }
    });
    mainMarks.push(++mark);
    yield* commitCommand({
      ref: "refs/heads/main",
      mark,
      from: i === 0 ? undefined : `:${mark - 1}`,
      author: signature(BASE_TIME + i * 60),
      message: `main commit ${i}\n`,
      files,
    });
  }

  const branchTips: { name: string; mark: number; files: FileChange[] }[] = [];
  for (let b = 0; b < spec.branches; b++) {
    const fork = Math.max(0, Math.floor(((b + 1) * mainCount) / (spec.branches + 1)) - 1);
    let parent = `:${mainMarks[fork]}`;
    let files: FileChange[] = [];
    for (let j = 0; j < 2; j++) {
      files = [{ path: `features/feature-${b}.txt`, data: textLines(text, 20 + j) }];
      yield* commitCommand({
        ref: `refs/heads/feature-${b}`,
        mark: ++mark,
        from: parent,
        author: signature(BASE_TIME + fork * 60 + 10 + j),
        message: `feature ${b} commit ${j}\n`,
        files,
      });
      parent = `:${mark}`;
    }
    branchTips.push({ name: `feature-${b}`, mark, files });
  }

  let mainTip = mainMarks[mainMarks.length - 1];
  let time = BASE_TIME + mainCount * 60;
  if (spec.merges) {
    for (const tip of branchTips) {
      yield* commitCommand({
        ref: "refs/heads/main",
        mark: ++mark,
        from: `:${mainTip}`,
        merges: [`:${tip.mark}`],
        author: signature(time += 60),
        message: `Merge branch '${tip.name}'\n`,
        files: tip.files,
      });
      mainTip = mark;
    }
  }

  for (let t = 0; t < spec.tags; t++) {
    const at = Math.max(0, Math.floor(((t + 1) * mainCount) / spec.tags) - 1);
    yield* tagCommand(`v1.${t}`, `:${mainMarks[at]}`, signature(time + 60 + t), `release 1.${t}\n`);
  }
}

/** Splits `total` into chunks of at most `chunk` bytes. */
export function splitBytes(total: number, chunk: number): number[] {
  const sizes: number[] = [];
  for (let left = total; left > 0; left -= chunk) sizes.push(Math.min(chunk, left));
  return sizes;
}

/** `lines` lines of seeded words. */
export function textLines(rng: SeededRandom, lines: number): string {
  let out = "";
  for (let i = 0; i < lines; i++) out += `${rng.words(8)}\n`;
  return out;
}

/** A large text file where each revision edits a few lines and appends one: delta-friendly. */
class DeltaFile {
  private readonly lines: string[];
  private revision = 0;

  constructor(private readonly rng: SeededRandom) {
    this.lines = Array.from({ length: 400 }, () => rng.words(10));
  }

  next(): string {
    if (this.revision > 0) {
      for (let e = 0; e < 3; e++) {
        this.lines[this.rng.int(this.lines.length)] = `r${this.revision} ${this.rng.words(10)}`;
      }
      this.lines.push(`revision ${this.revision}: ${this.rng.words(6)}`);
    }
    this.revision++;
    return `${this.lines.join("\n")}\n`;
  }
}
