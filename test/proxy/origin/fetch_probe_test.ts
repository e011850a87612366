/**
 * The probe fetch (src/proxy/origin/fetch_probe.ts) against a real `git http-backend`: the
 * origin's word on a fetch, at the cost of no pack.
 */
import { authorisedToFetch, probeFetch } from "../../../src/proxy/origin/fetch_probe.ts";
import { AuthMemo } from "../../../src/proxy/origin/auth_memo.ts";
import { recentlyAuthorised } from "../../../src/proxy/origin/forwarding.ts";
import { Metrics } from "../../../src/proxy/core/metrics.ts";
import type { ProxyContext } from "../../../src/proxy/core/context.ts";
import type { RepoRef } from "../../../src/proxy/core/repo.ts";
import { startOrigin } from "../../support/origin.ts";
import { makeRepo } from "../../support/fixtures.ts";
import { assert, assertEquals } from "../../support/assert.ts";

function contextFor(): ProxyContext {
  return {
    deps: {
      originFetch: (r: Request) => fetch(r),
      clock: { now: () => Date.now() },
      config: { authTtlSeconds: 60 },
    },
    authMemo: new AuthMemo(),
    metrics: new Metrics(),
  } as unknown as ProxyContext;
}

const as = (authorization?: string) =>
  new Request("http://edge/r.git/git-upload-pack", {
    method: "POST",
    headers: authorization ? { authorization } : {},
  });

Deno.test("probe fetch: a tip the origin serves authorises (no pack computed), an unknown one leaves it to the origin, a refusal is relayed", async () => {
  await using origin = await startOrigin({ requireAuth: { user: "alice", password: "pw" } });
  const { refs } = await makeRepo(origin, "r.git", { commits: 3 });
  const repo: RepoRef = { id: "r", path: "r.git", originUrl: origin.repoUrl("r.git") };
  const ctx = contextFor();
  const alice = as(`Basic ${btoa("alice:pw")}`);
  const tips = Object.values(refs);

  origin.stats.reset();
  assertEquals(await probeFetch(ctx, alice, repo, tips, "sha1"), "authorised");
  assertEquals(origin.stats.commands, { "fetch-probe": 1 }, "one fetch of nothing");
  assert(origin.stats.bytesOut < 1000, `an empty pack: ${origin.stats.bytesOut} bytes`);
  assert(recentlyAuthorised(ctx, alice, repo), "the memo knows alice now");
  origin.stats.reset();
  assertEquals(await authorisedToFetch(ctx, alice, repo, tips, "sha1"), "authorised");
  assertEquals(origin.stats.requests, 0, "within the TTL the memo answers");

  // A tip the origin does not have: its ERR is no leave to serve anything.
  const fresh = contextFor();
  assertEquals(await probeFetch(fresh, alice, repo, ["1".repeat(40)], "sha1"), "ask-origin");
  assert(!recentlyAuthorised(fresh, alice, repo), "no memo from an ERR");
  // No tips known: a fetch without wants.
  assertEquals(await probeFetch(fresh, alice, repo, [], "sha1"), "authorised");

  // Refused: the origin's 401, with its challenge, for the client.
  const refused = await probeFetch(ctx, as(), repo, tips, "sha1");
  assert(refused instanceof Response, "a response to relay");
  assertEquals(refused.status, 401);
  assert(refused.headers.get("www-authenticate")?.startsWith("Basic"), "the origin's challenge");
  await refused.body?.cancel();
  const wrong = await probeFetch(ctx, as(`Basic ${btoa("alice:nope")}`), repo, tips, "sha1");
  assert(wrong instanceof Response && wrong.status === 401, "a wrong password");
  await (wrong as Response).body?.cancel();
});
