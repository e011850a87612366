import { assertEquals, assertThrows } from "../support/assert.ts";
import { parseContentRange, planResponse } from "../../src/client/ranged_response.ts";
import { HttpStatusError, RangeMismatchError } from "../../src/client/errors.ts";

const URL_ = "http://user:secret@127.0.0.1/p.pack";

Deno.test("parseContentRange reads byte ranges and rejects junk", () => {
  assertEquals(parseContentRange("bytes 10-99/100"), { start: 10, end: 99, total: 100 });
  assertEquals(parseContentRange("bytes 0-9/*"), { start: 0, end: 9, total: undefined });
  assertEquals(parseContentRange("bytes 9-1/100"), null);
  assertEquals(parseContentRange("items 0-1/2"), null);
  assertEquals(parseContentRange(null), null);
});

Deno.test("planResponse resumes only on a 206 starting at the received offset", () => {
  const ok206 = new Response("x", { status: 206, headers: { "content-range": "bytes 5-9/10" } });
  assertEquals(planResponse(URL_, ok206, 5), { mode: "resume", total: 10 });
  const full = new Response("x", { headers: { "content-length": "10" } });
  assertEquals(planResponse(URL_, full, 5), { mode: "restart", total: 10 });
  const shifted = new Response("x", { status: 206, headers: { "content-range": "bytes 4-9/10" } });
  assertThrows(() => planResponse(URL_, shifted, 5), RangeMismatchError);
  const ahead = new Response("x", { status: 206, headers: { "content-range": "bytes 6-9/10" } });
  assertThrows(() => planResponse(URL_, ahead, 5), RangeMismatchError, "206 starts at byte 6");
  assertThrows(
    () => planResponse(URL_, new Response(null, { status: 416 }), 5),
    RangeMismatchError,
  );
  const notFound = assertThrows(
    () => planResponse(URL_, new Response(null, { status: 404 }), 0),
    HttpStatusError,
  );
  assertEquals(notFound.message.includes("secret"), false, "credentials never reach messages");
});
