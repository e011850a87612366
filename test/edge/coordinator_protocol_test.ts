import assert from "node:assert/strict";
import {
  CoordinatorCallError,
  CoordinatorProtocolError,
  decodeCall,
  decodeFailure,
  encodeCall,
  encodeFailure,
} from "../../edge/coordinator_protocol.ts";
import { OriginStatusError, OriginUnreachableError } from "../../src/proxy/origin.ts";

const REPO = { id: "0f".repeat(16), originUrl: "https://git.example/x.git", path: "x.git" };

Deno.test("a call survives encoding and decoding", async () => {
  const call = {
    op: "warm" as const,
    repo: REPO,
    auth: { headers: { authorization: "Basic eA==" } },
  };
  assert.deepEqual(await decodeCall(encodeCall(call)), call);
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
  ];
  for (const request of bad) await assert.rejects(decodeCall(request), CoordinatorProtocolError);
});

Deno.test("origin failures cross the Durable Object boundary as the same error types", () => {
  const refused = new OriginStatusError("https://git.example/x.git/git-upload-pack", 401, "auth");
  const back = decodeFailure("warm", "x.git", 500, JSON.stringify(encodeFailure(refused)));
  assert.ok(back instanceof OriginStatusError);
  assert.equal(back.message, refused.message);
  assert.equal(back.status, 401);

  const down = new OriginUnreachableError("https://git.example/x.git", new Error("refused"));
  const again = decodeFailure("warm", "x.git", 500, JSON.stringify(encodeFailure(down)));
  assert.ok(again instanceof OriginUnreachableError);
  assert.equal(again.message, down.message);
});

Deno.test("other failures become CoordinatorCallError, whatever the body", () => {
  const plain = decodeFailure(
    "status",
    "x.git",
    500,
    JSON.stringify(encodeFailure(new Error("boom"))),
  );
  assert.ok(plain instanceof CoordinatorCallError);
  assert.match(plain.message, /status for x\.git failed \(500\): boom/);
  const page = decodeFailure("manifest", "x.git", 503, "<html>overloaded</html>");
  assert.ok(page instanceof CoordinatorCallError);
  assert.match(page.message, /overloaded/);
});
