/**
 * Build lifecycle records: a {@link SnapshotBuilder} that logs each build's `build.start`, each
 * `build.step` (`fetch`, `split`, `publish`, with its time and what it produced), and its
 * `build.finish` (packs and bytes of the snapshot, `unchanged` when the origin had not moved) or
 * `build.fail` (the reason, and the step that failed). Records carry `repo` (the path clients use)
 * and `build` (the build's id); never credentials.
 *
 * Where a process runs a whole build in one call (`build`, the Deno server), the split of every
 * pack happens in one pass that `step` does not see: it is logged as one `split` step when the
 * `publish` step starts.
 */
import { type Manifest, manifestPacks } from "../core/manifest.ts";
import type { OriginAuth, RepoRef } from "../core/repo.ts";
import {
  type BuildProgress,
  type BuildState,
  SnapshotBuilder,
  type SnapshotBuilderDeps,
} from "./snapshot.ts";
import type { Logger } from "../core/log.ts";
import { publicMessage } from "../../redact.ts";

export class LoggingSnapshotBuilder extends SnapshotBuilder {
  readonly #log: Logger;
  readonly #now: () => number;
  /** Per build id: when it started and when its last logged step ended. */
  readonly #builds = new Map<string, { start: number; lastEnd: number; split: boolean }>();

  constructor(deps: SnapshotBuilderDeps & { log: Logger }) {
    super(deps);
    this.#log = deps.log;
    this.#now = () => deps.clock.now();
  }

  #finished(repo: RepoRef, manifest: Manifest, ms: number | undefined, unchanged: boolean): void {
    const packs = manifestPacks(manifest);
    this.#log.log("info", "build.finish", {
      repo: repo.path,
      unchanged,
      packs: packs.length,
      bytes: packs.reduce((sum, p) => sum + p.size, 0),
      layers: manifest.layers.length,
      durationMs: ms,
    });
  }

  #failed(repo: RepoRef, error: unknown, fields: Record<string, unknown>): void {
    this.#log.log("error", "build.fail", {
      repo: repo.path,
      reason: publicMessage(error),
      ...fields,
    });
  }

  /** Repositories (paths) with a `build` call running, each once. */
  running(): string[] {
    return [...new Set(this.#running.values())];
  }

  readonly #running = new Map<symbol, string>();

  override async build(
    repo: RepoRef,
    auth: OriginAuth,
    previous: Manifest | null,
  ): Promise<Manifest> {
    const start = this.#now();
    const id = Symbol();
    this.#running.set(id, repo.path);
    try {
      return await super.build(repo, auth, previous);
    } catch (error) {
      // `begin` and `step` logged theirs; anything else fails here.
      if (!(error instanceof Object && LOGGED.has(error))) {
        this.#failed(repo, error, { durationMs: this.#now() - start });
      }
      throw error;
    } finally {
      this.#running.delete(id);
    }
  }

  override async begin(
    repo: RepoRef,
    auth: OriginAuth,
    previous: Manifest | null,
  ): Promise<BuildProgress> {
    const start = this.#now();
    this.#log.log("info", "build.start", {
      repo: repo.path,
      previousBuiltAt: previous ? new Date(previous.builtAt).toISOString() : null,
    });
    let progress: BuildProgress;
    try {
      progress = await super.begin(repo, auth, previous);
    } catch (error) {
      this.#failed(repo, error, { step: "begin", durationMs: this.#now() - start });
      if (error instanceof Object) LOGGED.add(error);
      throw error;
    }
    if ("done" in progress) {
      this.#finished(repo, progress.done, this.#now() - start, true);
    } else {
      const state = progress.state;
      this.#builds.set(state.id, { start, lastEnd: this.#now(), split: false });
      this.#log.log("info", "build.step", {
        repo: repo.path,
        build: state.id,
        step: "begin",
        tips: Object.keys(state.tips).length,
        incremental: state.baseLayers.length > 0,
        durationMs: this.#now() - start,
      });
    }
    return progress;
  }

  override async step(state: BuildState, auth: OriginAuth): Promise<BuildProgress> {
    const build = this.#builds.get(state.id) ??
      { start: this.#now(), lastEnd: this.#now(), split: false };
    this.#builds.set(state.id, build);
    const start = this.#now();
    if (state.next === "split") build.split = true;
    if (state.next === "publish" && !build.split && state.written.length > 0) {
      // The split ran inside `build`, between the fetch step and now.
      this.#log.log("info", "build.step", {
        repo: state.repo.path,
        build: state.id,
        step: "split",
        packs: state.written.length,
        bytes: state.written.reduce((sum, p) => sum + p.size, 0),
        durationMs: start - build.lastEnd,
      });
    }
    let progress: BuildProgress;
    try {
      progress = await super.step(state, auth);
    } catch (error) {
      this.#builds.delete(state.id);
      this.#failed(state.repo, error, {
        build: state.id,
        step: state.next,
        durationMs: this.#now() - build.start,
      });
      if (error instanceof Object) LOGGED.add(error);
      throw error;
    }
    build.lastEnd = this.#now();
    const next = "state" in progress ? progress.state : undefined;
    this.#log.log("info", "build.step", {
      repo: state.repo.path,
      build: state.id,
      step: state.next,
      durationMs: build.lastEnd - start,
      ...(state.next === "fetch" && next?.pack
        ? { originBytes: next.pack.size, objects: next.pack.objects, parts: next.pack.parts.length }
        : {}),
      ...(state.next === "split" && next
        ? { packs: next.written.length - state.written.length }
        : {}),
    });
    if ("done" in progress) {
      this.#builds.delete(state.id);
      this.#finished(state.repo, progress.done, build.lastEnd - build.start, false);
    }
    return progress;
  }
}

/** Errors already logged as a build's failure (so `build` does not log them again). */
const LOGGED = new WeakSet<object>();
