import { AuthMemo } from "../../src/proxy/auth_memo.ts";
import { assert, assertEquals } from "../support/assert.ts";

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
  assert(!memo.accepted(memo.key("repo2", "Basic YWxpY2U6czNjcmV0"), 40_000, 30_000), "repo");
  assert(!memo.accepted(memo.key("repo1", "Basic YWxpY2U6d3Jvbmc="), 40_000, 30_000), "password");
  assert(!memo.accepted(memo.key("repo1", null), 40_000, 30_000), "anonymous is its own entry");
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
