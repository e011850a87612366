/**
 * The `forward` outcome of a fetch plan: the request goes to the origin as the client sent it
 * (less its `packfile-uris` line when the origin did not advertise that feature itself), and the
 * origin's answer to the client; the answer may seed the build the plan asks for.
 */
import type { FetchCall, PlanOf } from "./fetch_call.ts";
import { servedAnswer } from "./fetch_call.ts";
import { forwardUploadPack, relay } from "../origin/forwarding.ts";
import { withoutArg } from "../origin/request_body.ts";

export async function forwardedFetch(call: FetchCall, plan: PlanOf<"forward">): Promise<Response> {
  const { ctx, request, repo, req, args, sent } = call;
  const body = plan.stripUris ? withoutArg(sent, "packfile-uris") : sent;
  const origin = await forwardUploadPack(ctx, request, repo, body);
  const sentArgs = plan.stripUris ? { ...args, packfileUris: null } : args;
  const answer = await servedAnswer(call, origin, plan.build, { req, args: sentArgs });
  ctx.registry?.noteFetch(repo, "passthrough", answer.served, call.seen);
  return relay(origin, answer.body);
}
