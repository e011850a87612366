/**
 * The Worker's `Coordinator`: every call goes to the repository's `RepoCoordinator` Durable
 * Object, so builds are single-flight across all Worker isolates and locations.
 */
import type {
  Coordinator,
  Manifest,
  OriginAuth,
  RepoRef,
  SnapshotStatus,
} from "../src/proxy/deps.ts";
import {
  type CoordinatorFailure,
  type CoordinatorOp,
  type CoordinatorReplies,
  encodeCall,
} from "./coordinator_protocol.ts";
import type { DurableObjectNamespace } from "./worker_types.ts";

/** A coordinator call failed in the Durable Object (e.g. the snapshot build failed). */
export class CoordinatorCallError extends Error {
  override name = "CoordinatorCallError";
  constructor(
    readonly op: CoordinatorOp,
    readonly repoPath: string,
    readonly status: number,
    detail: string,
  ) {
    super(`snapshot coordinator ${op} for ${repoPath} failed (${status}): ${detail}`);
  }
}

const NO_AUTH: OriginAuth = { headers: {} };

/** `Coordinator` backed by one Durable Object per repository (named by the repository id). */
export class DurableObjectCoordinator implements Coordinator {
  readonly #namespace: DurableObjectNamespace;

  constructor(namespace: DurableObjectNamespace) {
    this.#namespace = namespace;
  }

  async manifest(repo: RepoRef): Promise<Manifest | null> {
    return (await this.#call("manifest", repo, NO_AUTH)).manifest;
  }

  async status(repo: RepoRef): Promise<SnapshotStatus> {
    return (await this.#call("status", repo, NO_AUTH)).status;
  }

  async schedule(repo: RepoRef, auth: OriginAuth): Promise<void> {
    await this.#call("schedule", repo, auth);
  }

  async warm(repo: RepoRef, auth: OriginAuth): Promise<SnapshotStatus> {
    return (await this.#call("warm", repo, auth)).status;
  }

  async #call<Op extends CoordinatorOp>(
    op: Op,
    repo: RepoRef,
    auth: OriginAuth,
  ): Promise<CoordinatorReplies[Op]> {
    const stub = this.#namespace.get(this.#namespace.idFromName(repo.id));
    const response = await stub.fetch(encodeCall({ op, repo, auth }));
    if (!response.ok) {
      const detail = failureDetail(await response.text());
      throw new CoordinatorCallError(op, repo.path, response.status, detail);
    }
    return await response.json() as CoordinatorReplies[Op];
  }
}

/** The `error` of a failure body; the raw text when the body is not the protocol's JSON. */
function failureDetail(text: string): string {
  try {
    const failure = JSON.parse(text) as Partial<CoordinatorFailure>;
    if (typeof failure.error === "string") return failure.error;
  } catch {
    // Not JSON (e.g. a runtime error page): report the text itself below.
  }
  return text.trim().slice(0, 500) || "empty response";
}
