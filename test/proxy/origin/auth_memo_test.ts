import { AuthMemo } from "../../../src/proxy/origin/auth_memo.ts";
import {
  noteFetchVerdict,
  noteOriginVerdict,
  recentlyAuthorised,
} from "../../../src/proxy/origin/forwarding.ts";
import type { ProxyContext } from "../../../src/proxy/core/context.ts";
import type { RepoRef } from "../../../src/proxy/core/repo.ts";
import { assert, assertEquals } from "../../support/assert.ts";

Deno.test("AuthMemo: an acceptance lasts the TTL, per repository and credential", () => {
  const memo = new AuthMemo();
  const alice = memo.key("repo1", "Basic YWxpY2U6czNjcmV0");
  memo.remember(alice, 1_000);
  assert(memo.accepted(alice, 1_000, 30_000), "just accepted");
  assert(memo.accepted(alice, 30_999, 30_000), "within the TTL");
  assert(!memo.accepted(alice, 31_000, 30_000), "lapsed after the TTL");
  assert(!memo.accepted(alice, 1_000, 30_000), "a lapsed entry is gone");
  memo.remember(alice, 40_000);
  assert(!memo.accepted(alice, 40_000, 0), "TTL 0: never");
  // TTL 0 dropped the entry: store it again, so that the keys below are looked up while alice's
  // is there (each checked again after them).
  memo.remember(alice, 40_000);
  assert(!memo.accepted(memo.key("repo2", "Basic YWxpY2U6czNjcmV0"), 40_000, 30_000), "repo");
  assert(!memo.accepted(memo.key("repo1", "Basic YWxpY2U6d3Jvbmc="), 40_000, 30_000), "password");
  assert(!memo.accepted(memo.key("repo1", null), 40_000, 30_000), "anonymous is its own entry");
  assert(!memo.accepted(memo.key("repo1\nBasic", "YWxpY2U6czNjcmV0"), 40_000, 30_000), "framing");
  assert(memo.accepted(alice, 40_000, 30_000), "alice's entry was there all along");
  assertEquals(memo.key("repo1", "Basic YWxpY2U6czNjcmV0"), alice, "the same key again");
  memo.forget(alice);
  assert(!memo.accepted(alice, 40_000, 30_000), "forgotten after a refusal");
});

Deno.test("AuthMemo: keys are salted hashes, and the memo is bounded", () => {
  const memo = new AuthMemo(3);
  const key = memo.key("r", "Bearer t0ps3cret");
  assert(/^[0-9a-f]{64}$/.test(key) && !key.includes("t0ps3cret"), "a hash, not the credential");
  assert(key !== new AuthMemo().key("r", "Bearer t0ps3cret"), "salted per instance");
  const keys = ["a", "b", "c", "d"].map((c) => memo.key("r", c));
  keys.forEach((k, i) => memo.remember(k, i));
  assertEquals(
    keys.map((k) => memo.accepted(k, 10, 1_000)),
    [false, true, true, true],
    "oldest out",
  );
});

Deno.test("the origin's verdicts: a 200 vouches for one repository and credential, a 401 or 403 revokes it at once", () => {
  let now = 1_000_000;
  const ctx = {
    deps: { clock: { now: () => now }, config: { authTtlSeconds: 60 } },
    authMemo: new AuthMemo(),
  } as unknown as ProxyContext;
  const repo = (path: string): RepoRef => ({
    id: `id-${path}`,
    originUrl: `http://o/${path}`,
    path,
  });
  const [r1, r2] = [repo("r1.git"), repo("r2.git")];
  const as = (authorization?: string) =>
    new Request("http://edge/r1.git/git-upload-pack", {
      method: "POST",
      headers: authorization ? { authorization } : {},
    });
  const alice = as("Basic YWxpY2U6czNjcmV0");
  assert(!recentlyAuthorised(ctx, alice, r1), "nothing known yet");
  // An ls-refs or info/refs the origin answers vouches for nothing (it may list refs to anyone).
  noteOriginVerdict(ctx, alice, r1, 200);
  assert(!recentlyAuthorised(ctx, alice, r1), "a listing is no leave to fetch");
  noteFetchVerdict(ctx, alice, r1, 200, now);
  assert(recentlyAuthorised(ctx, alice, r1), "accepted for r1");
  assert(!recentlyAuthorised(ctx, alice, r2), "r1's acceptance does not unlock r2");
  assert(!recentlyAuthorised(ctx, as("Basic YWxpY2U6d3Jvbmc="), r1), "nor another password");
  assert(!recentlyAuthorised(ctx, as(), r1), "nor the anonymous");
  noteFetchVerdict(ctx, alice, r1, 500, now);
  noteFetchVerdict(ctx, alice, r1, 404, now);
  assert(recentlyAuthorised(ctx, alice, r1), "an origin failure is no verdict on the credential");
  noteOriginVerdict(ctx, alice, r2, 401);
  assert(recentlyAuthorised(ctx, alice, r1), "a refusal for r2 leaves r1's acceptance");
  for (const refusal of [401, 403]) {
    noteFetchVerdict(ctx, alice, r1, 200, now);
    assert(recentlyAuthorised(ctx, alice, r1), `accepted again before the ${refusal}`);
    noteOriginVerdict(ctx, alice, r1, refusal);
    assert(!recentlyAuthorised(ctx, alice, r1), `a ${refusal} revokes at once, within the TTL`);
    // The same from a fetch's answer (the probe's, or a fetch relayed to the origin).
    noteFetchVerdict(ctx, alice, r1, 200, now);
    noteFetchVerdict(ctx, alice, r1, refusal, now);
    assert(!recentlyAuthorised(ctx, alice, r1), `a fetch's ${refusal} revokes at once too`);
  }
  // The acceptance dates from when the fetch was asked, not from when its answer came.
  noteFetchVerdict(ctx, alice, r1, 200, now - 10_000);
  now += 49_999;
  assert(recentlyAuthorised(ctx, alice, r1), "within the TTL");
  now += 1;
  assert(!recentlyAuthorised(ctx, alice, r1), "the TTL lapsed");
});
