import { assert, assertEquals, assertMatch, assertRejects } from "../../support/assert.ts";
import {
  CoordinatorCallError,
  CoordinatorProtocolError,
  decodeCall,
  decodeFailure,
  encodeCall,
  encodeFailure,
} from "../../../edge/cloudflare/coordinator_protocol.ts";
import { OriginStatusError, OriginUnreachableError } from "../../../src/proxy/origin.ts";

const REPO = { id: "0f".repeat(16), originUrl: "https://git.example/x.git", path: "x.git" };

Deno.test("a call survives encoding and decoding", async () => {
  const call = {
    op: "warm" as const,
    repo: REPO,
    auth: { headers: { authorization: "Basic eA==" } },
  };
  assertEquals(await decodeCall(encodeCall(call)), call);
  const schedule = { ...call, op: "schedule" as const, basis: { builtAt: 5, rebuild: true } };
  assertEquals(await decodeCall(encodeCall(schedule)), schedule);
});

Deno.test("malformed calls are protocol errors", async () => {
  const bad = [
    new Request("https://repo-coordinator/explode", { method: "POST", body: "{}" }),
    new Request("https://repo-coordinator/status", { method: "POST", body: "not json" }),
    new Request("https://repo-coordinator/status", {
      method: "POST",
      body: JSON.stringify({ repo: { ...REPO, id: "../x" }, auth: { headers: {} } }),
    }),
    new Request("https://repo-coordinator/status", {
      method: "POST",
      body: JSON.stringify({ repo: REPO, auth: { headers: { a: 1 } } }),
    }),
    new Request("https://repo-coordinator/schedule", {
      method: "POST",
      body: JSON.stringify({ repo: REPO, auth: { headers: {} }, basis: { builtAt: "soon" } }),
    }),
  ];
  for (const request of bad) await assertRejects(decodeCall(request), CoordinatorProtocolError);
});

Deno.test("origin failures cross the Durable Object boundary as the same error types", () => {
  const refused = new OriginStatusError("https://git.example/x.git/git-upload-pack", 401, "auth");
  const back = decodeFailure("warm", "x.git", 500, JSON.stringify(encodeFailure(refused)));
  assert(back instanceof OriginStatusError);
  assertEquals(back.message, refused.message);
  assertEquals(back.originStatus, 401);

  const down = new OriginUnreachableError("https://git.example/x.git", new Error("refused"));
  const again = decodeFailure("warm", "x.git", 500, JSON.stringify(encodeFailure(down)));
  assert(again instanceof OriginUnreachableError);
  assertEquals(again.message, down.message);
});

Deno.test("other failures become CoordinatorCallError, whatever the body", () => {
  const plain = decodeFailure(
    "status",
    "x.git",
    500,
    JSON.stringify(encodeFailure(new Error("boom"))),
  );
  assert(plain instanceof CoordinatorCallError);
  assertMatch(plain.message, /status for x\.git failed \(500\): boom/);
  const page = decodeFailure("manifest", "x.git", 503, "<html>overloaded</html>");
  assert(page instanceof CoordinatorCallError);
  assertMatch(page.message, /overloaded/);
});
