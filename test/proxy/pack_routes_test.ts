import { parseRange } from "../../src/proxy/pack_routes.ts";
import { assertEquals } from "../support/assert.ts";

Deno.test("Range headers parse like RFC 9110 single byte ranges", () => {
  assertEquals(parseRange(null, 100), undefined);
  assertEquals(parseRange("bytes=0-9", 100), { offset: 0, length: 10 });
  assertEquals(parseRange("bytes=90-", 100), { offset: 90, length: 10 });
  assertEquals(parseRange("bytes=90-500", 100), { offset: 90, length: 10 });
  assertEquals(parseRange("bytes=-10", 100), { offset: 90, length: 10 });
  assertEquals(parseRange("bytes=-500", 100), { offset: 0, length: 100 });
  assertEquals(parseRange("bytes=100-", 100), "unsatisfiable");
  assertEquals(parseRange("bytes=5-4", 100), "unsatisfiable");
  assertEquals(parseRange("bytes=0-1,5-6", 100), undefined);
  assertEquals(parseRange("items=0-1", 100), undefined);
});
