/**
 * `R2PackStore` inside workerd against Miniflare's local R2, driven through the fixture Worker
 * `r2_store_worker.ts` (one workerd instance for the whole file).
 */
import assert from "node:assert/strict";
import { seededRandom } from "../support/streams.ts";
import { startWorker } from "../edge/worker_harness.ts";

const MiB = 1024 * 1024;
const PART = 5 * MiB;

function pseudoRandomBytes(length: number, seed: number): Uint8Array<ArrayBuffer> {
  const rand = seededRandom(seed);
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i += 4) {
    const word = (rand() * 0x100000000) >>> 0;
    for (let j = 0; j < 4 && i + j < length; j++) bytes[i + j] = (word >>> (8 * j)) & 0xff;
  }
  return bytes;
}

interface PutReply {
  size?: number;
  error?: string;
  message?: string;
  calls: Record<string, number>;
}

Deno.test("R2PackStore in workerd", async (t) => {
  await using worker = await startWorker({
    entry: "test/storage/r2_store_worker.ts",
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
    assert.equal(reply.size, small.byteLength);
    assert.deepEqual(reply.calls, { put: 1 });
    const got = await get("repos/a/packs/small.pack");
    assert.equal(got.status, 200);
    assert.equal(got.size, small.byteLength);
    assert.deepEqual(got.bytes, small);
    const head = await info("repos/a/packs/small.pack");
    assert.equal(head.key, "repos/a/packs/small.pack");
    assert.equal(head.size, small.byteLength);
    assert.ok(head.modified >= before - 60_000 && head.modified <= Date.now() + 60_000);
  });

  await t.step("a longer body streams as a multipart upload of equal parts", async () => {
    const reply = await put("repos/a/packs/large.pack", large);
    assert.equal(reply.size, large.byteLength);
    assert.deepEqual(reply.calls, { createMultipartUpload: 1, uploadPart: 3, complete: 1 });
    const got = await get("repos/a/packs/large.pack");
    assert.equal(got.bytes.byteLength, large.byteLength);
    assert.deepEqual(got.bytes, large);
  });

  await t.step("a body ending on a part boundary uploads no empty part", async () => {
    const exact = large.subarray(0, 2 * PART);
    const reply = await put("repos/a/packs/exact.pack", exact);
    assert.equal(reply.size, exact.byteLength);
    assert.deepEqual(reply.calls, { createMultipartUpload: 1, uploadPart: 2, complete: 1 });
    assert.deepEqual((await get("repos/a/packs/exact.pack")).bytes, exact);
  });

  await t.step("get with a range returns those bytes and the whole size", async () => {
    const offset = PART - 10;
    const ranged = await get("repos/a/packs/large.pack", `?offset=${offset}&length=20`);
    assert.equal(ranged.size, large.byteLength);
    assert.deepEqual(ranged.bytes, large.subarray(offset, offset + 20));
    const tail = await get("repos/a/packs/large.pack", `?offset=${large.byteLength - 7}`);
    assert.deepEqual(tail.bytes, large.subarray(large.byteLength - 7));
  });

  await t.step("a failing body leaves the previous object in place (single put)", async () => {
    const reply = await put(
      "repos/a/packs/small.pack",
      pseudoRandomBytes(200 * 1024, 3),
      "&fail_after=65536",
    );
    assert.equal(reply.error, "StoreError");
    assert.match(reply.message ?? "", /source failed after 65536 bytes/);
    assert.equal(reply.calls.put, undefined);
    assert.deepEqual((await get("repos/a/packs/small.pack")).bytes, small);
  });

  await t.step("a failing body aborts the multipart upload and publishes nothing", async () => {
    const reply = await put("repos/a/packs/broken.pack", large, `&fail_after=${PART + MiB}`);
    assert.equal(reply.error, "StoreError");
    assert.equal(reply.calls.abort, 1);
    assert.equal(reply.calls.complete, undefined);
    assert.equal(await info("repos/a/packs/broken.pack"), null);
    assert.equal((await get("repos/a/packs/broken.pack")).status, 404);
  });

  await t.step("list follows the cursor across pages and honours the prefix", async () => {
    const fill = await fetch(`${worker.url}/fill?prefix=repos/b/packs/&count=7`, {
      method: "POST",
    });
    assert.equal(fill.status, 204);
    const res = await fetch(`${worker.url}/list?prefix=repos/b/&page=3`);
    const listed = await res.json() as {
      objects: { key: string; size: number }[];
      calls: Record<string, number>;
    };
    assert.deepEqual(
      listed.objects.map((o) => o.key),
      Array.from({ length: 7 }, (_, i) => `repos/b/packs/000${i}`),
    );
    assert.equal(listed.objects[3].size, "object 3".length);
    assert.equal(listed.calls.list, 3);
  });

  await t.step("delete removes an object; deleting a missing key is fine", async () => {
    const del = await fetch(`${worker.url}/objects/repos/a/packs/exact.pack`, { method: "DELETE" });
    assert.equal(del.status, 204);
    assert.equal(await info("repos/a/packs/exact.pack"), null);
    const again = await fetch(`${worker.url}/objects/repos/a/packs/exact.pack`, {
      method: "DELETE",
    });
    assert.equal(again.status, 204);
  });

  await t.step("an unsafe key is refused with a StoreError", async () => {
    const reply = await put("repos/a/bad%20key", small);
    assert.equal(reply.error, "StoreError");
    assert.match(reply.message ?? "", /invalid store key/);
  });
});
