/**
 * `R2PackStore` inside workerd against Miniflare's local R2, driven through the fixture Worker
 * `r2_store_worker.ts` (one workerd instance for the whole file).
 */
import { assert, assertEquals, assertMatch } from "../../support/assert.ts";
import { SeededRandom } from "../../support/random.ts";
import { MINIFLARE_LEAKS, startWorker } from "../../support/worker_harness.ts";

const MiB = 1024 * 1024;
const PART = 5 * MiB;

function pseudoRandomBytes(length: number, seed: number): Uint8Array<ArrayBuffer> {
  return new SeededRandom(seed).bytes(length);
}

interface PutReply {
  size?: number;
  error?: string;
  message?: string;
  calls: Record<string, number>;
}

// Opts out of the sanitizers: Miniflare leaks on dispose (see MINIFLARE_LEAKS).
Deno.test({ name: "R2PackStore in workerd", ...MINIFLARE_LEAKS }, async (t) => {
  await using worker = await startWorker({
    entry: "test/edge/cloudflare/r2_store_worker.ts",
    r2Buckets: ["BUCKET"],
  });

  const put = async (key: string, body: Uint8Array<ArrayBuffer>, query = ""): Promise<PutReply> => {
    const res = await fetch(`${worker.url}/objects/${key}?part=${PART}${query}`, {
      method: "PUT",
      body,
    });
    return await res.json() as PutReply;
  };
  const get = async (key: string, query = "") => {
    const res = await fetch(`${worker.url}/objects/${key}${query}`);
    const bytes = new Uint8Array(await res.arrayBuffer());
    return { status: res.status, size: Number(res.headers.get("x-object-size")), bytes };
  };
  const info = async (key: string) => await (await fetch(`${worker.url}/info/${key}`)).json();

  const small = pseudoRandomBytes(300 * 1024, 1);
  const large = pseudoRandomBytes(2 * PART + 12345, 2);

  await t.step("a body within one part is written with a single put", async () => {
    const before = Date.now();
    const reply = await put("repos/a/packs/small.pack", small);
    assertEquals(reply.size, small.byteLength);
    assertEquals(reply.calls, { put: 1 });
    const got = await get("repos/a/packs/small.pack");
    assertEquals(got.status, 200);
    assertEquals(got.size, small.byteLength);
    assertEquals(got.bytes, small);
    const head = await info("repos/a/packs/small.pack");
    assertEquals(head.key, "repos/a/packs/small.pack");
    assertEquals(head.size, small.byteLength);
    assert(head.modified >= before - 60_000 && head.modified <= Date.now() + 60_000);
  });

  await t.step("a longer body streams as a multipart upload of equal parts", async () => {
    const reply = await put("repos/a/packs/large.pack", large);
    assertEquals(reply.size, large.byteLength);
    assertEquals(reply.calls, { createMultipartUpload: 1, uploadPart: 3, complete: 1 });
    const got = await get("repos/a/packs/large.pack");
    assertEquals(got.bytes.byteLength, large.byteLength);
    assertEquals(got.bytes, large);
  });

  await t.step("a body ending on a part boundary uploads no empty part", async () => {
    const exact = large.subarray(0, 2 * PART);
    const reply = await put("repos/a/packs/exact.pack", exact);
    assertEquals(reply.size, exact.byteLength);
    assertEquals(reply.calls, { createMultipartUpload: 1, uploadPart: 2, complete: 1 });
    assertEquals((await get("repos/a/packs/exact.pack")).bytes, exact);
  });

  await t.step("get with a range returns those bytes and the whole size", async () => {
    const offset = PART - 10;
    const ranged = await get("repos/a/packs/large.pack", `?offset=${offset}&length=20`);
    assertEquals(ranged.size, large.byteLength);
    assertEquals(ranged.bytes, large.subarray(offset, offset + 20));
    const tail = await get("repos/a/packs/large.pack", `?offset=${large.byteLength - 7}`);
    assertEquals(tail.bytes, large.subarray(large.byteLength - 7));
  });

  await t.step("a failing body leaves the previous object in place (single put)", async () => {
    const reply = await put(
      "repos/a/packs/small.pack",
      pseudoRandomBytes(200 * 1024, 3),
      "&fail_after=65536",
    );
    assertEquals(reply.error, "StoreError");
    assertMatch(reply.message ?? "", /source failed after 65536 bytes/);
    assertEquals(reply.calls.put, undefined);
    assertEquals((await get("repos/a/packs/small.pack")).bytes, small);
  });

  await t.step("a failing body aborts the multipart upload and publishes nothing", async () => {
    const reply = await put("repos/a/packs/broken.pack", large, `&fail_after=${PART + MiB}`);
    assertEquals(reply.error, "StoreError");
    assertEquals(reply.calls.abort, 1);
    assertEquals(reply.calls.complete, undefined);
    assertEquals(await info("repos/a/packs/broken.pack"), null);
    assertEquals((await get("repos/a/packs/broken.pack")).status, 404);
  });

  await t.step("list follows the cursor across pages and honours the prefix", async () => {
    const fill = await fetch(`${worker.url}/fill?prefix=repos/b/packs/&count=7`, {
      method: "POST",
    });
    assertEquals(fill.status, 204);
    const res = await fetch(`${worker.url}/list?prefix=repos/b/&page=3`);
    const listed = await res.json() as {
      objects: { key: string; size: number }[];
      calls: Record<string, number>;
    };
    assertEquals(
      listed.objects.map((o) => o.key),
      Array.from({ length: 7 }, (_, i) => `repos/b/packs/000${i}`),
    );
    assertEquals(listed.objects[3].size, "object 3".length);
    assertEquals(listed.calls.list, 3);
  });

  await t.step("delete removes an object; deleting a missing key is fine", async () => {
    const del = await fetch(`${worker.url}/objects/repos/a/packs/exact.pack`, { method: "DELETE" });
    assertEquals(del.status, 204);
    assertEquals(await info("repos/a/packs/exact.pack"), null);
    const again = await fetch(`${worker.url}/objects/repos/a/packs/exact.pack`, {
      method: "DELETE",
    });
    assertEquals(again.status, 204);
  });

  await t.step("an unsafe key is refused with a StoreError", async () => {
    const reply = await put("repos/a/bad%20key", small);
    assertEquals(reply.error, "StoreError");
    assertMatch(reply.message ?? "", /invalid store key/);
  });
});
