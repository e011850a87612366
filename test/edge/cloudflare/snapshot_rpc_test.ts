import { assert, assertEquals, assertMatch, assertRejects } from "../../support/assert.ts";
import {
  errorOf,
  failureOf,
  outcomeOf,
  SnapshotCallError,
  valueOf,
} from "../../../edge/cloudflare/snapshot_rpc.ts";
import {
  OriginAnswerError,
  OriginRedirectError,
  OriginStatusError,
  OriginUnreachableError,
} from "../../../src/proxy/origin/origin.ts";

/** What RPC does to a value: a structured clone. */
function overRpc<T>(value: T): Promise<T> {
  return Promise.resolve(structuredClone(value));
}

Deno.test("a value crosses as itself; a throw or a rejection becomes a failure", async () => {
  assertEquals(await outcomeOf(() => Promise.resolve(5)), { value: 5 });
  assertEquals(await outcomeOf(() => Promise.reject(new Error("boom"))), {
    failure: { error: "boom" },
  });
  assertEquals(
    await outcomeOf((): Promise<number> => {
      throw new RangeError("sync");
    }),
    { failure: { error: "sync" } },
  );
  assertEquals(await valueOf("status", "x.git", () => overRpc({ value: { builds: 2 } })), {
    builds: 2,
  });
});

Deno.test("origin failures cross the Durable Object boundary as the same error types", async () => {
  const refused = new OriginStatusError("https://git.example/x.git/git-upload-pack", 401, "auth");
  const back = await assertRejects(
    valueOf("warm", "x.git", () => overRpc({ failure: failureOf(refused) })),
    OriginStatusError,
  );
  assertEquals(back.message, refused.message);
  assertEquals(back.originStatus, 401);

  const down = new OriginUnreachableError("https://git.example/x.git", new Error("refused"));
  const again = errorOf("warm", "x.git", structuredClone(failureOf(down)));
  assert(again instanceof OriginUnreachableError);
  assertEquals(again.message, down.message);

  const moved = new OriginRedirectError("https://git.example/x.git/info/refs", 301);
  const redirect = errorOf("status", "x.git", structuredClone(failureOf(moved)));
  assert(redirect instanceof OriginRedirectError);
  assertEquals(redirect.originStatus, 301);
  assertEquals(redirect.message, moved.message);

  const garbled = new OriginAnswerError(
    "https://git.example/x.git/git-upload-pack",
    "was cut short",
  );
  const answer = errorOf("warm", "x.git", structuredClone(failureOf(garbled)));
  assert(answer instanceof OriginAnswerError);
  assertEquals([answer.message, answer.status], [garbled.message, 502]);
});

Deno.test("other failures, and calls the runtime rejects, become SnapshotCallError", async () => {
  const plain = errorOf("status", "x.git", failureOf(new Error("boom")));
  assert(plain instanceof SnapshotCallError);
  assertMatch(plain.message, /status for x\.git failed: boom/);
  const unreachable = await assertRejects(
    valueOf("manifest", "x.git", () => Promise.reject(new Error("Durable Object reset"))),
    SnapshotCallError,
  );
  assertMatch(unreachable.message, /manifest for x\.git failed: Durable Object reset/);
});
