import { parseRange, resumesAtEnd } from "../../../src/proxy/downloads/ranged.ts";
import { assertEquals } from "../../support/assert.ts";

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

Deno.test("a resume at the very end is recognised, nothing else", () => {
  assertEquals(resumesAtEnd("bytes=100-", 100), true);
  assertEquals(resumesAtEnd(" bytes=100- ", 100), true);
  for (const h of [null, "bytes=99-", "bytes=101-", "bytes=100-100", "bytes=-0", "bytes=0-"]) {
    assertEquals(resumesAtEnd(h, 100), false, String(h));
  }
  assertEquals(resumesAtEnd("bytes=0-", 0), false, "an empty object has no end to resume at");
});
