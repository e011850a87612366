/**
 * A protocol-v2 `fetch` as the upload-pack route read it, handed to the function that carries out
 * its plan (one per {@link FetchPlan} action), and what those functions share: starting the build
 * a plan asks for once the origin (or the response cache) has served the request.
 */
import type { ScheduleBasis } from "../core/deps.ts";
import type { Manifest } from "../core/manifest.ts";
import type { RepoRef } from "../core/repo.ts";
import type { ProxyContext } from "../core/context.ts";
import type { FetchPlan } from "./fetch_plan.ts";
import { authOf } from "../origin/origin.ts";
import { peekAnswer } from "../origin/forwarding.ts";
import { seedingBody } from "../snapshots/pack_seeds.ts";
import type { CommandRequest } from "../../git/command_request.ts";
import type { FetchArgs } from "../../git/fetch_request.ts";
import { inBackground } from "../core/deps.ts";

/** The fetch being answered. */
export interface FetchCall {
  ctx: ProxyContext;
  request: Request;
  repo: RepoRef;
  /** The request's URL at the edge (the base of pack URIs when no public URL is set). */
  url: URL;
  /** The client's command request, parsed, and its arguments. */
  req: CommandRequest;
  args: FetchArgs;
  /** The request's bytes as the client sent them (forwarded as they are when nothing changes). */
  sent: Uint8Array;
  /** The snapshot in force as the fetch found it, when intact (for the repository registry). */
  seen: Manifest | undefined;
}

/** The plan of one action, e.g. `PlanOf<"rewrite">`. */
export type PlanOf<A extends FetchPlan["action"]> = Extract<FetchPlan, { action: A }>;

/** Starts the build `build` asks for (none when null), with the request's credentials. */
export function scheduleBuild(call: FetchCall, build: ScheduleBasis | null): void {
  if (!build) return;
  const { ctx, repo, request } = call;
  const admitted = ctx.admitBuild?.(repo) ?? true;
  if (admitted === false) return;
  const auth = authOf(request.headers);
  const schedule = () => ctx.deps.coordinator.schedule(repo, auth, build);
  // A fleet asks its coordinator whether the store is full: the build starts after the answer.
  inBackground(
    ctx.deps,
    admitted === true ? schedule() : admitted.then((ok) => ok ? schedule() : undefined),
  );
}

/**
 * Looks at the start of the origin's upload-pack answer (see `peekAnswer`) and, when the origin
 * served the request (200, no `ERR`), starts the build `build` asks for: only a request the origin
 * authorised and answered starts one (with its credentials, in memory). With `seed` (what the
 * origin was asked), the answer's pack also seeds that build (pack_seeds.ts).
 */
export async function servedAnswer(
  call: FetchCall,
  origin: Response,
  build: ScheduleBasis | null,
  seed?: { req: CommandRequest; args: FetchArgs },
): Promise<{ served: boolean; body: ReadableStream<Uint8Array> | null }> {
  const answer = await peekAnswer(origin);
  if (build && answer.served) {
    if (seed) {
      answer.body = seedingBody(call.ctx.deps, call.repo.id, seed.req, seed.args, answer.body);
    }
    scheduleBuild(call, build);
  }
  return answer;
}
