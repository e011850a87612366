/**
 * The wire format between the Worker (`DurableObjectCoordinator`) and a repository's Durable
 * Object (`RepoCoordinator`): one `POST https://repo-coordinator/<op>` per `SnapshotCoordinator` call,
 * JSON both ways. Origin credentials travel in the body, in memory only; the DO never stores them.
 */
import type {
  Manifest,
  OriginAuth,
  RepoRef,
  ScheduleBasis,
  SnapshotStatus,
} from "../../src/proxy/deps.ts";
import {
  OriginRedirectError,
  OriginStatusError,
  OriginUnreachableError,
} from "../../src/proxy/origin.ts";

/** The `SnapshotCoordinator` operations the Durable Object serves. */
export type CoordinatorOp = "manifest" | "status" | "schedule" | "warm";

const OPS: readonly CoordinatorOp[] = ["manifest", "status", "schedule", "warm"];

/** One call to a repository's Durable Object. */
export interface CoordinatorCall {
  op: CoordinatorOp;
  repo: RepoRef;
  auth: OriginAuth;
  /** For `schedule`: what the request for a build was based on. */
  basis?: ScheduleBasis;
}

/** Reply bodies, per operation. `started`: this call started a build (rather than joining one). */
export interface CoordinatorReplies {
  manifest: { manifest: Manifest | null };
  status: { status: SnapshotStatus };
  schedule: { started: boolean };
  warm: { status: SnapshotStatus; started: boolean };
}

/** The body of a failed call. `origin` is set when the origin refused or could not be reached. */
export interface CoordinatorFailure {
  error: string;
  origin?: { url: string; status: number | null; detail: string };
}

/** A coordinator call failed in the Durable Object for a reason other than the origin. */
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

/** A request to the Durable Object that does not follow this protocol. */
export class CoordinatorProtocolError extends Error {
  override name = "CoordinatorProtocolError";
}

const ORIGIN = "https://repo-coordinator";

/** Encodes a call as the request the Worker sends to the DO stub. */
export function encodeCall(call: CoordinatorCall): Request {
  return new Request(`${ORIGIN}/${call.op}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ repo: call.repo, auth: call.auth, basis: call.basis }),
  });
}

/** Decodes and validates a request received by the DO. */
export async function decodeCall(request: Request): Promise<CoordinatorCall> {
  const op = new URL(request.url).pathname.slice(1);
  if (request.method !== "POST" || !isOp(op)) {
    throw new CoordinatorProtocolError(`unknown coordinator call ${request.method} /${op}`);
  }
  let body: unknown;
  try {
    body = await request.json();
  } catch (error) {
    throw new CoordinatorProtocolError(`coordinator call /${op} has no JSON body`, {
      cause: error,
    });
  }
  if (
    !isRecord(body) || !isRepoRef(body.repo) || !isAuth(body.auth) ||
    !(body.basis === undefined || isBasis(body.basis))
  ) {
    throw new CoordinatorProtocolError(`coordinator call /${op} has a malformed body`);
  }
  const call: CoordinatorCall = { op, repo: body.repo, auth: body.auth };
  if (body.basis !== undefined) call.basis = body.basis;
  return call;
}

/** A JSON response for a reply or failure. */
export function jsonResponse(
  body: CoordinatorReplies[CoordinatorOp] | CoordinatorFailure,
  status = 200,
): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}

function isOp(op: string): op is CoordinatorOp {
  return (OPS as readonly string[]).includes(op);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isRepoRef(value: unknown): value is RepoRef {
  return isRecord(value) && typeof value.id === "string" && /^[0-9a-f]+$/.test(value.id) &&
    typeof value.originUrl === "string" && typeof value.path === "string";
}

function isBasis(value: unknown): value is ScheduleBasis {
  return isRecord(value) && (value.builtAt === null || typeof value.builtAt === "number") &&
    (value.rebuild === undefined || typeof value.rebuild === "boolean");
}

function isAuth(value: unknown): value is OriginAuth {
  return isRecord(value) && isRecord(value.headers) &&
    Object.values(value.headers).every((v) => typeof v === "string");
}

/** The failure body for `error`, keeping what the Worker needs to rebuild origin errors. */
export function encodeFailure(error: unknown): CoordinatorFailure {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof OriginStatusError) {
    const prefix = `origin answered ${error.originStatus} for ${error.url}: `;
    const detail = message.startsWith(prefix) ? message.slice(prefix.length) : "";
    return { error: message, origin: { url: error.url, status: error.originStatus, detail } };
  }
  if (error instanceof OriginRedirectError) {
    const detail = "a redirect, which the edge does not follow: configure the origin's final URL";
    return { error: message, origin: { url: error.url, status: error.originStatus, detail } };
  }
  if (error instanceof OriginUnreachableError) {
    const cause = error.cause instanceof Error ? error.cause.message : String(error.cause);
    return { error: message, origin: { url: error.url, status: null, detail: cause } };
  }
  return { error: message };
}

/**
 * The error a failed call stands for on the Worker side: the origin's typed errors again (so the
 * app answers 502 as on Deno), otherwise a `CoordinatorCallError`. `body` is the raw reply text.
 */
export function decodeFailure(
  op: CoordinatorOp,
  repoPath: string,
  httpStatus: number,
  body: string,
): Error {
  const failure = parseFailure(body);
  if (failure === null) {
    return new CoordinatorCallError(op, repoPath, httpStatus, body.trim().slice(0, 500) || "empty");
  }
  const origin = failure.origin;
  if (origin?.status != null) {
    return new OriginStatusError(origin.url, origin.status, origin.detail);
  }
  if (origin) return new OriginUnreachableError(origin.url, new Error(origin.detail));
  return new CoordinatorCallError(op, repoPath, httpStatus, failure.error);
}

function parseFailure(body: string): CoordinatorFailure | null {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return null; // Not the protocol's JSON (e.g. a runtime error page): the caller reports the text.
  }
  if (!isRecord(value) || typeof value.error !== "string") return null;
  const origin = value.origin;
  if (
    isRecord(origin) && typeof origin.url === "string" && typeof origin.detail === "string" &&
    (origin.status === null || typeof origin.status === "number")
  ) {
    return {
      error: value.error,
      origin: { url: origin.url, status: origin.status, detail: origin.detail },
    };
  }
  return { error: value.error };
}
