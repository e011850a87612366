/**
 * The `rewrite` outcome of a fetch plan: the origin is asked only for what the snapshot lacks
 * (the plan's `originArgs`), and its answer reaches the client with the snapshot's packs named,
 * by signed URL, in a `packfile-uris` section before its pack.
 */
import type { FetchCall, PlanOf } from "./fetch_call.ts";
import { servedAnswer } from "./fetch_call.ts";
import { forwardUploadPack, relay } from "../origin/forwarding.ts";
import { manifestPacks } from "../core/manifest.ts";
import { injectBeforePackfile } from "./rewrite.ts";
import { packfileUrisSection } from "./answered_fetch.ts";
import { serializeCommandRequest } from "../../git/command_request.ts";
import { serializeFetchArgs } from "../../git/fetch_request.ts";
import { recordOutcome } from "../core/request_record.ts";

export async function rewrittenFetch(call: FetchCall, plan: PlanOf<"rewrite">): Promise<Response> {
  const { ctx, request, repo, url, req, args } = call;
  const body = serializeCommandRequest({ ...req, args: serializeFetchArgs(plan.originArgs) });
  const origin = await forwardUploadPack(ctx, request, repo, body);
  const answer = await servedAnswer(call, origin, plan.build);
  const rewrite = answer.served && answer.body !== null;
  ctx.registry?.noteFetch(repo, rewrite ? "rewritten" : "passthrough", answer.served, call.seen);
  if (!rewrite || !answer.body) return relay(origin, answer.body);
  const section = await packfileUrisSection(ctx, repo, plan.manifest, url, args.sidebandAll);
  recordOutcome(ctx, { action: "rewrote", packUris: manifestPacks(plan.manifest).length });
  return relay(
    origin,
    injectBeforePackfile(answer.body, section, { sidebandAll: args.sidebandAll }),
  );
}
