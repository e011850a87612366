/**
 * The git mirrors on the Deno server (src/proxy/mirror/mirrors.ts says what they are for): one
 * bare repository per repository under `--mirror-dir`, driven with the `git` binary.
 *
 * - Seeded from the snapshot's stored packs (copied into `objects/pack/`, indexed by `git
 *   index-pack`, refs set from the manifest's tips, joined into one pack) in a temporary
 *   directory renamed into place once whole: a mirror directory exists only complete.
 * - Updated by `git fetch --atomic --prune` of the origin's branches and tags (a killed or
 *   failed fetch changes no ref; a partial pack it leaves is a temporary file git ignores), then,
 *   for wants still missing, by id. The caller's credential goes to git as `http.extraHeader` in
 *   `GIT_CONFIG_COUNT`/`KEY`/`VALUE` environment variables: never on a command line (which `ps`
 *   shows), never in a file, never logged.
 * - Answered from by `git upload-pack --stateless-rpc` with `GIT_PROTOCOL=version=2`, as `git
 *   http-backend` drives it. Its first {@link HOLD_BYTES} are held until it ends or writes more,
 *   so that a run failing on a damaged mirror (a pack truncated or gone) sends nothing and the
 *   fetch goes to the origin; a longer answer that fails later is cut (the client's git reports
 *   it) and the mirror is discarded all the same.
 */
import type { Manifest } from "../../src/proxy/core/manifest.ts";
import { manifestPacks } from "../../src/proxy/core/manifest.ts";
import type { OriginAuth, RepoRef } from "../../src/proxy/core/repo.ts";
import {
  type MirrorAnswer,
  MirrorDamagedError,
  type MirrorHost,
} from "../../src/proxy/mirror/mirrors.ts";
import type { PackStore } from "../../src/storage/store.ts";
import type { Logger } from "../../src/proxy/core/log.ts";

/** An answer up to this size is held until upload-pack has succeeded. */
export const HOLD_BYTES = 4 << 20;

export interface GitMirrorOptions {
  /** Directory of the mirrors (created when missing). */
  dir: string;
  /** Where the snapshot packs are read from when seeding. */
  store: PackStore;
  /**
   * The file of a store key, where the store keeps files (FsPackStore): seeding then copies the
   * file (`copy_file_range`). Never a hard link: a link changes the inode's ctime, which is part
   * of the store's version of the object, and the snapshot would then look rewritten.
   */
  pathOf?: (key: string) => string;
  /** The git to run (default `git` from `PATH`). */
  git?: string;
  /** Longest an update (fetch from the origin) may take before it is killed; default 10 min. */
  updateTimeoutMs?: number;
  log?: Logger;
}

const HEX = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/** The environment every git run gets: no system or user configuration, never a prompt. */
const BASE_ENV: Record<string, string> = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_TERMINAL_PROMPT: "0",
  GIT_ASKPASS: "/bin/false",
  SSH_ASKPASS: "/bin/false",
};

export class GitMirrorHost implements MirrorHost {
  readonly #dir: string;
  readonly #store: PackStore;
  readonly #pathOf?: (key: string) => string;
  readonly #git: string;
  readonly #updateTimeoutMs: number;
  readonly #log?: Logger;

  constructor(opts: GitMirrorOptions) {
    this.#dir = opts.dir;
    this.#store = opts.store;
    this.#pathOf = opts.pathOf;
    this.#git = opts.git ?? "git";
    this.#updateTimeoutMs = opts.updateTimeoutMs ?? 600_000;
    this.#log = opts.log;
  }

  /** Where `repo`'s mirror lives (the repository id is hex: no path tricks). */
  pathOf(repo: RepoRef | string): string {
    const id = typeof repo === "string" ? repo : repo.id;
    if (!/^[0-9a-f]+$/.test(id)) throw new Error(`not a repository id: ${id}`);
    return `${this.#dir}/${id}.git`;
  }

  async exists(repo: RepoRef): Promise<boolean> {
    try {
      return (await Deno.stat(`${this.pathOf(repo)}/HEAD`)).isFile;
    } catch {
      return false;
    }
  }

  async missing(repo: RepoRef, oids: readonly string[]): Promise<string[]> {
    const valid = oids.filter((o) => HEX.test(o));
    const out = valid.length === 0 ? "" : await this.#run(
      ["cat-file", "--batch-check=%(objectname)"],
      { cwd: this.pathOf(repo), stdin: valid.join("\n") + "\n" },
    );
    const present = new Set(out.split("\n").filter((l) => HEX.test(l)));
    // Present is not enough: everything they reach must be there too (a killed update may have
    // written a new tip's commit and not its trees and blobs). Wants a ref reaches cost nothing
    // here (`--not --all`; refs move only once a fetch is whole); others are walked down to them.
    if (present.size > 0 && !await this.#whole(repo, [...present])) {
      // Either an update was cut short (its objects dangle: the refs' history is whole) or the
      // mirror is damaged (its refs' history is not): the first is completed by the next update,
      // the second must go.
      await this.#run(["fsck", "--connectivity-only", "--no-dangling", "--no-progress"], {
        cwd: this.pathOf(repo),
      }).catch((error) => {
        throw new MirrorDamagedError(error instanceof Error ? error.message : String(error));
      });
      return [...oids];
    }
    return oids.filter((o) => !present.has(o));
  }

  /** Whether every object `oids` reach is in the mirror. */
  async #whole(repo: RepoRef, oids: string[]): Promise<boolean> {
    try {
      await this.#run(["rev-list", "--objects", "--quiet", "--stdin", "--not", "--all"], {
        cwd: this.pathOf(repo),
        stdin: oids.join("\n") + "\n",
      });
      return true;
    } catch {
      return false;
    }
  }

  async seed(repo: RepoRef, manifest: Manifest): Promise<void> {
    await Deno.mkdir(this.#dir, { recursive: true });
    const tmp = `${this.#dir}/${repo.id}.seed-${crypto.randomUUID()}`;
    try {
      const format = manifest.objectFormat ?? "sha1";
      await this.#run(["init", "-q", "--bare", `--object-format=${format}`, tmp]);
      for (
        const [key, value] of [
          ["gc.auto", "0"],
          ["maintenance.auto", "false"],
          ["core.logAllRefUpdates", "false"],
          ["uploadpack.allowFilter", "true"],
          ["fetch.writeCommitGraph", "false"],
        ]
      ) await this.#run(["config", key, value], { cwd: tmp });
      for (const pack of manifestPacks(manifest)) {
        if (!HEX.test(pack.hash)) throw new Error(`snapshot pack with a bad name: ${pack.hash}`);
        const file = `${tmp}/objects/pack/pack-${pack.hash}.pack`;
        if (!await this.#copy(pack.key, file)) {
          const obj = await this.#store.get(pack.key);
          if (!obj) throw new Error(`snapshot pack ${pack.key} is missing`);
          const out = await Deno.open(file, { write: true, createNew: true });
          await obj.body.pipeTo(out.writable);
        }
        // Checks every object and writes the `.idx` beside the pack.
        await this.#run(["index-pack", file], { cwd: tmp });
      }
      const lines = Object.entries(manifest.tips)
        .filter(([ref, oid]) => ref.startsWith("refs/") && HEX.test(oid))
        .map(([ref, oid]) => `create ${ref} ${oid}\n`).join("");
      if (lines) await this.#run(["update-ref", "--stdin"], { cwd: tmp, stdin: lines });
      // One pack, its deltas as stored and no new delta search (`--window=0`: quick). Served
      // from the snapshot's parts as they are, upload-pack's pack-objects would look for deltas
      // between every two objects of different packs (it skips pairs within one pack, which
      // their packer tried): seconds per clone of a repository of incompressible files.
      if (manifestPacks(manifest).length > 1) {
        await this.#run(["repack", "-a", "-d", "-q", "--window=0"], { cwd: tmp });
      }
      // Before it is ever served: every object the tips reach is there (`index-pack` checked the
      // objects the packs hold, not that they hold all of them). A snapshot that lacks one makes
      // no mirror; its fetches go to the origin.
      await this.#run(["fsck", "--connectivity-only", "--no-dangling", "--no-progress"], {
        cwd: tmp,
      });
      await Deno.rename(tmp, this.pathOf(repo));
      this.#log?.log("info", "mirror.seed", {
        repo: repo.path,
        packs: manifestPacks(manifest).length,
      });
    } finally {
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    }
  }

  /** Copies the store's file of `key` to `file`; false where it cannot. */
  async #copy(key: string, file: string): Promise<boolean> {
    if (!this.#pathOf) return false;
    try {
      await Deno.copyFile(this.#pathOf(key), file);
      return true;
    } catch {
      return false;
    }
  }

  async update(repo: RepoRef, auth: OriginAuth, oids: readonly string[]): Promise<void> {
    const cwd = this.pathOf(repo);
    // The configured origin: an http(s) URL, never something git would take for an option.
    if (!/^https?:\/\//.test(repo.originUrl)) throw new Error("origin is not an http(s) URL");
    const env = { ...credentialEnv(auth) };
    const signal = AbortSignal.timeout(this.#updateTimeoutMs);
    const started = Date.now();
    await this.#run([
      "-c",
      "protocol.version=2",
      "fetch",
      "--quiet",
      "--atomic",
      "--prune",
      "--no-tags",
      "--no-write-fetch-head",
      "--no-auto-gc",
      repo.originUrl,
      "+refs/heads/*:refs/heads/*",
      "+refs/tags/*:refs/tags/*",
    ], { cwd, env, signal });
    const still = (await this.missing(repo, oids)).filter((o) => HEX.test(o));
    if (still.length > 0) {
      // Objects no branch or tag reaches (fetch by id, as protocol v2 allows): the origin says
      // whether it has them.
      await this.#run([
        "-c",
        "protocol.version=2",
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--no-auto-gc",
        repo.originUrl,
        ...still,
      ], { cwd, env, signal }).catch(() => {});
    }
    this.#log?.log("info", "mirror.update", { repo: repo.path, ms: Date.now() - started });
  }

  async serve(repo: RepoRef, request: Uint8Array): Promise<MirrorAnswer> {
    const child = new Deno.Command(this.#git, {
      args: ["upload-pack", "--stateless-rpc", "."],
      cwd: this.pathOf(repo),
      env: { ...BASE_ENV, GIT_PROTOCOL: "version=2" },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(child.stderr).text().catch(() => "");
    const writer = child.stdin.getWriter();
    writer.write(request).then(() => writer.close()).catch(() => {});
    const reader = child.stdout.getReader();
    const held: Uint8Array[] = [];
    let size = 0;
    let done = false;
    while (size <= HOLD_BYTES) {
      const r = await reader.read();
      if (r.done) {
        done = true;
        break;
      }
      held.push(r.value);
      size += r.value.byteLength;
    }
    if (done) {
      const status = await child.status;
      if (!status.success) {
        return { ok: false, reason: `upload-pack failed: ${(await stderr).slice(0, 500)}` };
      }
      return { ok: true, body: new Blob(held as Uint8Array<ArrayBuffer>[]).stream() };
    }
    // Longer than held: streamed from here; a failure now cuts the answer.
    const onFailure = async (reason: string) => {
      this.#log?.log("warn", "mirror.discard", { repo: repo.path, reason });
      await this.discard(repo.id).catch(() => {});
    };
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const chunk of held) c.enqueue(chunk);
      },
      async pull(c) {
        const r = await reader.read();
        if (!r.done) return c.enqueue(r.value);
        const status = await child.status;
        if (status.success) return c.close();
        const reason = (await stderr).slice(0, 500);
        await onFailure(reason);
        c.error(new Error(`upload-pack on the mirror failed: ${reason}`));
      },
      async cancel() {
        await reader.cancel().catch(() => {});
        try {
          child.kill();
        } catch { /* already ended */ }
        await child.status;
      },
    }, { highWaterMark: 0 });
    return { ok: true, body };
  }

  async pack(
    repo: RepoRef,
    wants: readonly string[],
    haves: readonly string[],
  ): Promise<ReadableStream<Uint8Array>> {
    const cwd = this.pathOf(repo);
    const bad = [...wants, ...haves].find((o) => !HEX.test(o));
    if (bad !== undefined) throw new Error(`not an object id: ${bad.slice(0, 80)}`);
    if (wants.length === 0) throw new Error("nothing to pack");
    const tmp = `${this.#dir}/${repo.id}.layer-${crypto.randomUUID()}`;
    await Deno.mkdir(tmp);
    try {
      // Into a file, not `--stdout`: git then checks every entry it copies from the mirror's
      // packs against its CRC (to stdout it copies them unchecked), so bit rot fails here and
      // not in the snapshot. `--revs` with `^have` lines: the objects the new tips add; no
      // `--thin`: the pack is self-contained.
      const revs = [...wants, ...haves.map((h) => `^${h}`)].join("\n") + "\n";
      const hash = (await this.#run(
        ["pack-objects", "--revs", "--delta-base-offset", "-q", `${tmp}/layer`],
        { cwd, stdin: revs },
      )).trim();
      if (!HEX.test(hash)) throw new Error(`pack-objects named no pack: ${hash.slice(0, 80)}`);
      const file = await Deno.open(`${tmp}/layer-${hash}.pack`);
      // The open file is all the reader needs: its directory goes now (the space with the file's
      // last reference), so nothing is left behind however the pack is read.
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
      return file.readable;
    } catch (error) {
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
      throw error;
    }
  }

  async discard(repoId: string): Promise<void> {
    const path = this.pathOf(repoId);
    const trash = `${path}.discard-${crypto.randomUUID()}`;
    try {
      await Deno.rename(path, trash);
    } catch {
      return;
    }
    await Deno.remove(trash, { recursive: true }).catch(() => {});
  }

  async refsChangedAt(repo: RepoRef): Promise<number | null> {
    // A fetch or seed writes each ref it moves through a lock file renamed into place, and packs
    // refs into packed-refs: the newest of those is the last change. Bounded: the first 1000
    // entries of each directory.
    const root = this.pathOf(repo);
    let newest: number | null = null;
    const note = (t: Date | null) => {
      if (t && (newest === null || t.getTime() > newest)) newest = t.getTime();
    };
    note((await Deno.stat(`${root}/packed-refs`).catch(() => null))?.mtime ?? null);
    const walk = async (dir: string, depth: number): Promise<void> => {
      let seen = 0;
      try {
        for await (const e of Deno.readDir(dir)) {
          if (++seen > 1000) return;
          const p = `${dir}/${e.name}`;
          if (e.isDirectory && depth < 4) await walk(p, depth + 1);
          else if (e.isFile) note((await Deno.stat(p).catch(() => null))?.mtime ?? null);
        }
      } catch {
        // No such directory: nothing there.
      }
    };
    await walk(`${root}/refs`, 0);
    return newest;
  }

  async size(repo: RepoRef): Promise<number> {
    return await du(this.pathOf(repo));
  }

  /**
   * Removes the directories a seed, a layer's pack or a discard leave while they run
   * (`<id>.seed-*`, `<id>.layer-*`, `<id>.discard-*`): at start-up, those of a process that died
   * mid-way (one process uses a mirror directory). Returns how many went.
   */
  async sweepLeftovers(): Promise<number> {
    let removed = 0;
    try {
      for await (const e of Deno.readDir(this.#dir)) {
        if (!/^[0-9a-f]+\.(seed|layer|discard)-[0-9a-f-]+$/.test(e.name)) continue;
        await Deno.remove(`${this.#dir}/${e.name}`, { recursive: true }).catch(() => {});
        removed++;
      }
    } catch {
      // No directory yet: nothing left behind.
    }
    if (removed > 0) this.#log?.log("info", "mirror.sweep", { removed });
    return removed;
  }

  async list(): Promise<{ id: string; bytes: number }[]> {
    const out: { id: string; bytes: number }[] = [];
    try {
      for await (const e of Deno.readDir(this.#dir)) {
        const m = /^([0-9a-f]+)\.git$/.exec(e.name);
        if (e.isDirectory && m) out.push({ id: m[1], bytes: await du(`${this.#dir}/${e.name}`) });
      }
    } catch {
      // No directory yet: no mirrors.
    }
    return out;
  }

  /** Runs git; its stdout, or an error with its stderr. */
  async #run(
    args: string[],
    opts: { cwd?: string; stdin?: string; env?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<string> {
    const child = new Deno.Command(this.#git, {
      args,
      cwd: opts.cwd,
      env: { ...BASE_ENV, ...opts.env },
      stdin: opts.stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
      signal: opts.signal,
    }).spawn();
    if (opts.stdin !== undefined) {
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(opts.stdin)).catch(() => {});
      await w.close().catch(() => {});
    }
    const { success, stdout, stderr } = await child.output();
    if (!success) {
      // Never the arguments' environment (credentials); the command and git's message.
      // (`fsck` names what is missing on its stdout.)
      const message = [stderr, stdout].map((b) => new TextDecoder().decode(b).trim().slice(0, 500))
        .filter((m) => m).join("; ");
      throw new Error(
        `git ${args.find((a) => !a.startsWith("-") && !a.includes("="))} failed: ${message}`,
      );
    }
    return new TextDecoder().decode(stdout);
  }
}

/**
 * The caller's credential as git configuration in the environment (`http.extraHeader`, one per
 * header), no credential helper, and no redirects followed.
 */
export function credentialEnv(auth: OriginAuth): Record<string, string> {
  // No redirects: git would send the header on to wherever the origin points it.
  const entries: [string, string][] = [];
  entries.push(["credential.helper", ""]);
  entries.push(["http.followRedirects", "false"]);
  for (const [name, value] of Object.entries(auth.headers)) {
    if (/[\r\n]/.test(value)) continue;
    entries.push(["http.extraHeader", `${name}: ${value}`]);
  }
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(entries.length) };
  entries.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

/** Bytes of the files under `path` (0 when there is nothing). */
async function du(path: string): Promise<number> {
  let total = 0;
  try {
    for await (const e of Deno.readDir(path)) {
      const p = `${path}/${e.name}`;
      if (e.isDirectory) total += await du(p);
      else if (e.isFile) total += (await Deno.stat(p).catch(() => ({ size: 0 }))).size;
    }
  } catch {
    return total;
  }
  return total;
}
