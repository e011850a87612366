/**
 * What crosses Durable Object RPC between the Worker (`DurableObjectCoordinator`) and a
 * repository's Durable Object (`RepoSnapshotsObject`): the methods the object serves, and how their
 * failures cross.
 *
 * RPC carries arguments and results by structured clone, but an error thrown in the object reaches
 * the Worker as a plain `Error`: its class and fields are lost, so an origin's 401 would become the
 * edge's 500. Each method therefore returns an `Outcome`, its value or the failure described well
 * enough to raise the origin's typed errors again on the Worker side (the app answers 502 for those,
 * as on Deno). Origin credentials travel as arguments, in memory only; the object never stores them.
 */
import type { ScheduleBasis, SnapshotStatus } from "../../src/proxy/core/deps.ts";
import type { Manifest } from "../../src/proxy/core/manifest.ts";
import type { OriginAuth, RepoRef } from "../../src/proxy/core/repo.ts";
import {
  OriginAnswerError,
  OriginRedirectError,
  OriginStatusError,
  OriginUnreachableError,
} from "../../src/proxy/origin/origin.ts";

/**
 * The RPC methods of a repository's Durable Object: `SnapshotCoordinator`'s, each returning an
 * `Outcome`. `started`: the call started a build (rather than joining one or starting none).
 */
export interface RepoSnapshotsRpc {
  manifest(repo: RepoRef): Promise<Outcome<Manifest | null>>;
  status(repo: RepoRef): Promise<Outcome<SnapshotStatus>>;
  schedule(repo: RepoRef, auth: OriginAuth, basis?: ScheduleBasis): Promise<Outcome<boolean>>;
  /** `rebuild`: a fresh build, not a layer on the snapshot in force (its packs are damaged). */
  warm(
    repo: RepoRef,
    auth: OriginAuth,
    rebuild?: boolean,
  ): Promise<Outcome<{ status: SnapshotStatus; started: boolean }>>;
}

/** The RPC methods' names. */
export type SnapshotOp = keyof RepoSnapshotsRpc;

/** A method's result: its value, or why it failed. */
export type Outcome<T> = { value: T } | { failure: Failure };

/**
 * A failure in the Durable Object. `origin` is set when the origin refused, redirected, could not
 * be reached or sent an unusable answer: `kind` says which, to raise the same error again.
 */
export interface Failure {
  error: string;
  origin?: {
    kind: "status" | "redirect" | "unreachable" | "answer";
    url: string;
    status: number | null;
    detail: string;
  };
}

/** A call to the Durable Object failed for a reason other than the origin. */
export class SnapshotCallError extends Error {
  override name = "SnapshotCallError";
  constructor(readonly op: SnapshotOp, readonly repoPath: string, detail: string, cause?: unknown) {
    super(`snapshot coordinator ${op} for ${repoPath} failed: ${detail}`, { cause });
  }
}

/** Durable Object side: the outcome of `work`, a failure rather than a throw or rejection. */
export async function outcomeOf<T>(work: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { value: await work() };
  } catch (error) {
    return { failure: failureOf(error) };
  }
}

/** The failure that `error` stands for, keeping what the Worker needs to rebuild origin errors. */
export function failureOf(error: unknown): Failure {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof OriginStatusError) {
    return {
      error: message,
      origin: { kind: "status", url: error.url, status: error.originStatus, detail: error.detail },
    };
  }
  if (error instanceof OriginRedirectError) {
    return {
      error: message,
      origin: { kind: "redirect", url: error.url, status: error.originStatus, detail: "" },
    };
  }
  if (error instanceof OriginUnreachableError) {
    return {
      error: message,
      origin: { kind: "unreachable", url: error.url, status: null, detail: error.detail },
    };
  }
  if (error instanceof OriginAnswerError) {
    return {
      error: message,
      origin: { kind: "answer", url: error.url, status: 200, detail: error.detail },
    };
  }
  return { error: message };
}

/**
 * Worker side: the value of the call `op` for `repoPath`, or the error its failure stands for: the
 * origin's typed errors again, otherwise a `SnapshotCallError`. A call that rejected (the runtime
 * could not reach or run the object) is a `SnapshotCallError` too.
 */
export async function valueOf<T>(
  op: SnapshotOp,
  repoPath: string,
  call: () => Promise<Outcome<T>>,
): Promise<T> {
  let outcome: Outcome<T>;
  try {
    outcome = await call();
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new SnapshotCallError(op, repoPath, detail, error);
  }
  if ("value" in outcome) return outcome.value;
  throw errorOf(op, repoPath, outcome.failure);
}

/** The error `failure` stands for on the Worker side. */
export function errorOf(op: SnapshotOp, repoPath: string, failure: Failure): Error {
  const origin = failure.origin;
  switch (origin?.kind) {
    case "status":
      return new OriginStatusError(origin.url, origin.status ?? 502, origin.detail);
    case "redirect":
      return new OriginRedirectError(origin.url, origin.status ?? 302);
    case "unreachable":
      return new OriginUnreachableError(origin.url, new Error(origin.detail));
    case "answer":
      return new OriginAnswerError(origin.url, origin.detail);
  }
  return new SnapshotCallError(op, repoPath, failure.error);
}
