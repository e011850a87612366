/**
 * The git mirrors on the Deno server (src/proxy/mirror/mirrors.ts says what they are for): one
 * bare repository per repository under `--mirror-dir`, driven with the `git` binary.
 *
 * - Seeded from the snapshot's stored packs (copied into `objects/pack/`, indexed by `git
 *   index-pack`, refs set from the manifest's tips, joined into one pack) in a temporary
 *   directory renamed into place once whole: a mirror directory exists only complete.
 * - Updated by one protocol-v2 `fetch` the edge sends the origin itself with the caller's
 *   credential (held for that request only: never on a command line, in a file or in a log; no
 *   redirect followed): wants are the tips the mirror lacks, haves its own tips, `done` (no
 *   negotiation round). The pack is indexed by `git index-pack --stdin --fix-thin` (kept until
 *   the refs reach it), then the branches and tags are set by one `git update-ref --stdin`
 *   transaction from the origin's listing: the one the caller was just given (no request), else
 *   an `ls-refs` of the update's own. A refused, killed or failed update changes no ref; a
 *   partial pack it leaves is a temporary file git ignores.
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
  MirrorUpdateRefused,
  type UpdateHint,
} from "../../src/proxy/mirror/mirrors.ts";
import { PktLineReader } from "../../src/git/pktline.ts";
import { readLsRefsAnswer } from "../../src/git/ls_refs.ts";
import { readFetchResponse } from "../../src/git/fetch_response.ts";
import { serializeCommandRequest } from "../../src/git/command_request.ts";
import { UPLOAD_PACK_REQUEST_TYPE, UPLOAD_PACK_RESULT_TYPE } from "../../src/git/media_types.ts";
import { AGENT } from "../../src/version.ts";
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
  /** How the origin is called (default: `fetch`). */
  originFetch?: (request: Request) => Promise<Response>;
  log?: Logger;
}

const HEX = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
/** The refs a mirror keeps: the origin's branches and tags. */
const MIRRORED_REF = /^refs\/(heads|tags)\/[^\0-\x20\x7f~^:?*[\\]+$/;
/** Bounds of one update: refs set, wants and haves sent, listing bytes read. */
export const MAX_UPDATE_REFS = 100_000;
export const MAX_UPDATE_WANTS = 10_000;
export const MAX_UPDATE_HAVES = 256;
export const MAX_LISTING_BYTES = 16 << 20;

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
  readonly #originFetch: (request: Request) => Promise<Response>;

  constructor(opts: GitMirrorOptions) {
    this.#originFetch = opts.originFetch ?? ((r) => fetch(r));
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

  async update(
    repo: RepoRef,
    auth: OriginAuth,
    oids: readonly string[],
    hint: UpdateHint = {},
  ): Promise<void> {
    const cwd = this.pathOf(repo);
    // The configured origin: an http(s) URL.
    if (!/^https?:\/\//.test(repo.originUrl)) throw new Error("origin is not an http(s) URL");
    const signal = AbortSignal.timeout(this.#updateTimeoutMs);
    const started = Date.now();
    // The origin's branches and tags: the listing the caller was just given (no request), else
    // one `ls-refs` of the origin's own.
    const listing = hint.refs ?? await this.#lsRefs(repo, auth, signal);
    const mirrored = Object.entries(listing)
      .filter(([ref, oid]) => MIRRORED_REF.test(ref) && HEX.test(oid));
    const listed = mirrored.slice(0, MAX_UPDATE_REFS);
    // Wanted: what was asked for (all of it, or the update fails), and every listed tip within
    // the bound, less what the mirror has (the mirror follows the whole listing: one fetch per
    // new state of the repository, whatever the runners of that state ask for).
    const requested = new Set(oids.filter((o) => HEX.test(o)));
    const lacking = await this.missing(repo, [
      ...new Set([...requested, ...listed.map(([, oid]) => oid)]),
    ]);
    const asked = lacking.filter((o) => requested.has(o));
    if (asked.length > MAX_UPDATE_WANTS) throw new Error("more wants than one update fetches");
    const wants = [...asked, ...lacking.filter((o) => !requested.has(o))]
      .slice(0, MAX_UPDATE_WANTS);
    // The mirror's branches and tags, newest first when a fetch needs its haves (reading each
    // tip: a mirror that cannot is damaged).
    const current = (await this.#run([
      "for-each-ref",
      "--format=%(objectname) %(refname)",
      ...(wants.length > 0 ? ["--sort=-creatordate"] : []),
      "refs/heads/",
      "refs/tags/",
    ], { cwd }).catch((error) => {
      throw new MirrorDamagedError(error instanceof Error ? error.message : String(error));
    })).split("\n").filter(Boolean).map((l) => l.split(" ") as [string, string]);
    let pack: string | null = null;
    if (wants.length > 0) {
      const haves = [...new Set(current.map(([oid]) => oid))].slice(0, MAX_UPDATE_HAVES);
      pack = await this.#fetchPack(repo, auth, wants, haves, signal, hint);
    }
    try {
      // A listed id is in the mirror if it was there or has just been fetched (the pack was
      // indexed whole; a want the origin still left out shows when the caller looks again).
      const absent = new Set(lacking);
      for (const w of pack ? wants : []) absent.delete(w);
      // Pruned only on a listing of its own, read whole.
      const prune = hint.refs === undefined && listed.length === mirrored.length;
      await this.#setRefs(repo, listed, new Map(current.map(([oid, ref]) => [ref, oid])), {
        present: (oid) => !absent.has(oid),
        prune,
      });
    } finally {
      // The pack is kept (`.keep`) until the refs that reach it are set: nothing that repacks
      // the mirror meanwhile may drop its objects as unreachable.
      if (pack) await Deno.remove(`${cwd}/objects/pack/pack-${pack}.keep`).catch(() => {});
    }
    this.#log?.log("info", "mirror.update", {
      repo: repo.path,
      ms: Date.now() - started,
      wants: wants.length,
      listing: hint.refs ? "caller's" : "own",
    });
  }

  /** The origin's `ls-refs` of branches and tags with `auth`: ref → id. */
  async #lsRefs(
    repo: RepoRef,
    auth: OriginAuth,
    signal: AbortSignal,
  ): Promise<Record<string, string>> {
    const res = await this.#origin(repo, auth, signal, {}, {
      command: "ls-refs",
      capabilities: [AGENT],
      args: ["ref-prefix refs/heads/", "ref-prefix refs/tags/"],
    });
    try {
      return await readLsRefsAnswer(res.body!, { maxBytes: MAX_LISTING_BYTES });
    } catch (error) {
      throw new Error(
        `origin ls-refs for the mirror: ${error instanceof Error ? error.message : error}`,
      );
    }
  }

  /**
   * One protocol-v2 `fetch` of `wants` from the origin (haves: the mirror's tips; `done`: no
   * negotiation round), its pack indexed into the mirror (`index-pack --fix-thin`, kept). Only
   * arguments every v2 upload-pack takes. Answers the new pack's name.
   */
  async #fetchPack(
    repo: RepoRef,
    auth: OriginAuth,
    wants: readonly string[],
    haves: readonly string[],
    signal: AbortSignal,
    hint: UpdateHint,
  ): Promise<string> {
    const cwd = this.pathOf(repo);
    const res = await this.#origin(repo, auth, signal, hint, {
      command: "fetch",
      capabilities: [AGENT],
      args: [
        "thin-pack",
        "ofs-delta",
        "no-progress",
        ...wants.map((w) => `want ${w}`),
        ...[...new Set(haves)].map((h) => `have ${h}`),
        "done",
      ],
    });
    // Indexed into a quarantine of its own (git's receive-pack does the same): the mirror's
    // objects are its bases, and its files join the mirror only once whole. A full disk or a
    // killed git leaves nothing in the mirror's own pack directory; the quarantine goes.
    let objects: string;
    try {
      objects = `${await Deno.realPath(cwd)}/objects`;
    } catch (error) {
      await res.body?.cancel().catch(() => {});
      throw error;
    }
    const quarantine = `${objects}/incoming-${crypto.randomUUID()}`;
    try {
      await Deno.mkdir(`${quarantine}/pack`, { recursive: true }).catch(async (error) => {
        await res.body?.cancel().catch(() => {});
        throw error;
      });
      const name = await this.#indexPack(res, { cwd, quarantine, objects, signal }, hint);
      await migrate(`${quarantine}/pack`, `${objects}/pack`);
      return name;
    } finally {
      await Deno.remove(quarantine, { recursive: true }).catch(() => {});
    }
  }

  /** `res`'s pack through `index-pack --stdin --fix-thin` into `quarantine`; its name. */
  async #indexPack(
    res: Response,
    at: { cwd: string; quarantine: string; objects: string; signal: AbortSignal },
    hint: UpdateHint,
  ): Promise<string> {
    const { cwd, quarantine, objects, signal } = at;
    const child = new Deno.Command(this.#git, {
      args: ["index-pack", "--stdin", "--fix-thin", "--keep=gitedge mirror update"],
      cwd,
      env: {
        ...BASE_ENV,
        GIT_OBJECT_DIRECTORY: quarantine,
        GIT_ALTERNATE_OBJECT_DIRECTORIES: objects,
      },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      signal,
    }).spawn();
    const output = child.output();
    const reader = new PktLineReader(res.body!);
    try {
      let packed = false;
      for await (const part of readFetchResponse(reader)) {
        if (part.section !== "packfile") continue;
        await part.pack.pipeTo(child.stdin);
        packed = true;
      }
      if (!packed) throw new Error("the origin sent no pack");
      await reader.cancel().catch(() => {});
      hint.onOriginStatus?.(200);
    } catch (error) {
      await reader.cancel().catch(() => {});
      await child.stdin.abort().catch(() => {});
      try {
        child.kill();
      } catch { /* ended */ }
      await output.catch(() => {});
      throw error;
    }
    const { success, stdout, stderr } = await output;
    if (!success) {
      throw new Error(
        `git index-pack failed: ${new TextDecoder().decode(stderr).trim().slice(0, 500)}`,
      );
    }
    const name = /^(?:keep|pack)\t([0-9a-f]+)/.exec(new TextDecoder().decode(stdout));
    if (!name) throw new Error("git index-pack named no pack");
    return name[1];
  }

  /**
   * Sets the mirror's branches and tags (`current`: ref → id) to `listed` where it holds their
   * objects, in one transaction (all or none); with `prune`, deletes those the listing lacks.
   */
  async #setRefs(
    repo: RepoRef,
    listed: [string, string][],
    current: Map<string, string>,
    opts: { present: (oid: string) => boolean; prune: boolean },
  ): Promise<void> {
    const cwd = this.pathOf(repo);
    const { present, prune } = opts;
    const names = new Set(listed.map(([ref]) => ref));
    const lines: string[] = [];
    for (const [ref, oid] of listed) {
      if (present(oid) && current.get(ref) !== oid) lines.push(`update ${ref} ${oid}\n`);
    }
    if (prune) {
      for (const ref of current.keys()) if (!names.has(ref)) lines.push(`delete ${ref}\n`);
    }
    if (lines.length > 0) {
      await this.#run(["update-ref", "--stdin"], { cwd, stdin: lines.join("") });
    }
  }

  /**
   * One upload-pack command sent to the origin with `auth` (no redirects followed: the
   * credential goes nowhere else); its answer when the origin answers 200 with a result, else
   * an error. The status goes to `hint.onOriginStatus`.
   */
  async #origin(
    repo: RepoRef,
    auth: OriginAuth,
    signal: AbortSignal,
    hint: UpdateHint,
    request: { command: string; capabilities: string[]; args: string[] },
  ): Promise<Response> {
    const headers = new Headers();
    for (const [name, value] of Object.entries(auth.headers)) {
      if (!/[\r\n]/.test(value)) headers.set(name, value);
    }
    headers.set("git-protocol", "version=2");
    headers.set("content-type", UPLOAD_PACK_REQUEST_TYPE);
    headers.set("accept", UPLOAD_PACK_RESULT_TYPE);
    headers.set("user-agent", `git/${AGENT.slice("agent=".length)}`);
    const res = await this.#originFetch(
      new Request(`${repo.originUrl}/git-upload-pack`, {
        method: "POST",
        headers,
        body: serializeCommandRequest(request) as Uint8Array<ArrayBuffer>,
        redirect: "manual",
        signal,
      }),
    );
    // A refusal is the origin's word on the credential; a 200 only once its answer proved whole.
    if (res.status === 401 || res.status === 403) hint.onOriginStatus?.(res.status);
    const type = res.headers.get("content-type") ?? "";
    if (res.status !== 200 || !type.startsWith(UPLOAD_PACK_RESULT_TYPE) || !res.body) {
      await res.body?.cancel().catch(() => {});
      throw new MirrorUpdateRefused(
        res.status,
        `origin answered ${res.status} to ${request.command}`,
      );
    }
    return res;
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
   * (`<id>.seed-*`, `<id>.layer-*`, `<id>.discard-*`) and the partial packs of an update in a
   * mirror: at start-up, those of a process that died mid-way (one process uses a mirror
   * directory). Returns how many went.
   */
  async sweepLeftovers(): Promise<number> {
    let removed = 0;
    try {
      for await (const e of Deno.readDir(this.#dir)) {
        if (/^[0-9a-f]+\.git$/.test(e.name)) {
          removed += await dropTemporaries(`${this.#dir}/${e.name}/objects`);
          continue;
        }
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
 * Removes what a git that died writing into the mirror whose object directory is `objects` left
 * there: an update's quarantine (`incoming-*`) and git's temporary files in `pack/` (`tmp_*`).
 * Only at start-up, before anything runs in the mirror (a layer's `pack-objects` also writes its
 * `tmp_pack_*` there while it runs). Returns how many went.
 */
async function dropTemporaries(objects: string): Promise<number> {
  let removed = 0;
  const drop = async (dir: string, match: RegExp) => {
    try {
      for await (const e of Deno.readDir(dir)) {
        if (!match.test(e.name)) continue;
        await Deno.remove(`${dir}/${e.name}`, { recursive: true }).catch(() => {});
        removed++;
      }
    } catch {
      // No such directory: nothing left there.
    }
  };
  await drop(objects, /^incoming-/);
  await drop(`${objects}/pack`, /^tmp_/);
  return removed;
}

/**
 * Moves the files of a quarantine's pack directory `from` into the mirror's `to`: the `.keep`
 * first (nothing may repack the pack away), the `.idx` last (git sees a pack by its index, and
 * then everything beside it is in place). Renames within one filesystem: each file whole.
 */
async function migrate(from: string, to: string): Promise<void> {
  const rank = (name: string) =>
    name.endsWith(".keep") ? 0 : name.endsWith(".pack") ? 1 : name.endsWith(".idx") ? 3 : 2;
  const names: string[] = [];
  for await (const e of Deno.readDir(from)) if (e.isFile) names.push(e.name);
  names.sort((a, b) => rank(a) - rank(b));
  for (const name of names) await Deno.rename(`${from}/${name}`, `${to}/${name}`);
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
