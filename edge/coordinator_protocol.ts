/**
 * The wire format between the Worker (`DurableObjectCoordinator`) and a repository's Durable
 * Object (`RepoCoordinator`): one `POST https://repo-coordinator/<op>` per `Coordinator` call,
 * JSON both ways. Origin credentials travel in the body, in memory only; the DO never stores them.
 */
import type { Manifest, OriginAuth, RepoRef, SnapshotStatus } from "../src/proxy/deps.ts";

/** The `Coordinator` operations the Durable Object serves. */
export type CoordinatorOp = "manifest" | "status" | "schedule" | "warm";

const OPS: readonly CoordinatorOp[] = ["manifest", "status", "schedule", "warm"];

/** One call to a repository's Durable Object. */
export interface CoordinatorCall {
  op: CoordinatorOp;
  repo: RepoRef;
  auth: OriginAuth;
}

/** Reply bodies, per operation. */
export interface CoordinatorReplies {
  manifest: { manifest: Manifest | null };
  status: { status: SnapshotStatus };
  schedule: { scheduled: true };
  warm: { status: SnapshotStatus };
}

/** The body of a failed call. */
export interface CoordinatorFailure {
  error: string;
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
    body: JSON.stringify({ repo: call.repo, auth: call.auth }),
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
  if (!isRecord(body) || !isRepoRef(body.repo) || !isAuth(body.auth)) {
    throw new CoordinatorProtocolError(`coordinator call /${op} has a malformed body`);
  }
  return { op, repo: body.repo, auth: body.auth };
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

function isAuth(value: unknown): value is OriginAuth {
  return isRecord(value) && isRecord(value.headers) &&
    Object.values(value.headers).every((v) => typeof v === "string");
}
