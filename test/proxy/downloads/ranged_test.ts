import {
  parseRange,
  type RangedObject,
  rangedResponse,
  resumesAtEnd,
} from "../../../src/proxy/downloads/ranged.ts";
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

function object(bytes: Uint8Array, over: Partial<RangedObject> = {}) {
  const served: number[] = [];
  const obj: RangedObject = {
    size: bytes.length,
    contentType: "application/octet-stream",
    etag: '"x"',
    maxAgeSeconds: 60,
    ranges: true,
    gone: "gone",
    open: (range) =>
      Promise.resolve(
        new Blob([
          (range ? bytes.subarray(range.offset, range.offset + range.length) : bytes) as Uint8Array<
            ArrayBuffer
          >,
        ]).stream(),
      ),
    served: (n) => served.push(n),
    ...over,
  };
  return { obj, served };
}

async function ask(obj: RangedObject, headers: Record<string, string>, method = "GET") {
  const res = await rangedResponse(new Request("http://e/x", { method, headers }), obj);
  const body = new Uint8Array(await res.arrayBuffer());
  return { res, body, h: (k: string) => res.headers.get(k) };
}

Deno.test("a ranged object: whole, a range, If-Range, 416 and HEAD", async () => {
  const bytes = new Uint8Array(100).map((_, i) => i);
  const { obj, served } = object(bytes);
  const whole = await ask(obj, {});
  assertEquals([whole.res.status, whole.body.length, whole.h("content-length")], [200, 100, "100"]);
  assertEquals(whole.h("cache-control"), "private, max-age=60, immutable");
  assertEquals([whole.h("etag"), whole.h("accept-ranges")], ['"x"', "bytes"]);
  const part = await ask(obj, { range: "bytes=10-19" });
  assertEquals([part.res.status, part.h("content-range")], [206, "bytes 10-19/100"]);
  assertEquals(part.body, bytes.subarray(10, 20));
  const same = await ask(obj, { range: "bytes=-5", "if-range": '"x"' });
  assertEquals([same.res.status, same.body], [206, bytes.subarray(95)]);
  const other = await ask(obj, { range: "bytes=-5", "if-range": '"y"' });
  assertEquals([other.res.status, other.body.length], [200, 100]);
  const past = await ask(obj, { range: "bytes=100-" });
  assertEquals([past.res.status, past.h("content-range"), past.body.length], [
    416,
    "bytes */100",
    0,
  ]);
  const head = await ask(obj, { range: "bytes=0-9" }, "HEAD");
  assertEquals([head.res.status, head.h("content-length"), head.body.length], [206, "10", 0]);
  assertEquals(served, [100, 10, 5, 100], "counted once per body, not for 416 or HEAD");
});

Deno.test("a ranged object: resume at the end, whole-only objects, and one gone", async () => {
  const bytes = new Uint8Array(50);
  const resumable = object(bytes, { emptyResumeAtEnd: true }).obj;
  const end = await ask(resumable, { range: "bytes=50-" });
  assertEquals([end.res.status, end.h("content-range"), end.h("cache-control")], [
    204,
    "bytes */50",
    "no-store",
  ]);
  const whole = object(bytes, { ranges: false }).obj;
  const all = await ask(whole, { range: "bytes=0-9" });
  assertEquals([all.res.status, all.body.length, all.h("accept-ranges")], [200, 50, "none"]);
  assertEquals((await ask(whole, { range: "bytes=50-" })).res.status, 200, "no 416 either");
  const { obj, served } = object(bytes, { open: () => Promise.resolve(null) });
  const gone = await ask(obj, {});
  assertEquals([gone.res.status, new TextDecoder().decode(gone.body)], [404, "gitedge: gone\n"]);
  assertEquals(served, []);
});
