/**
 * The store contract (store_contract.ts) on the S3 store, against `s3rver`, an S3 emulator from
 * npm (no real S3-compatible server installs here), with 5 MiB parts so the large object goes
 * multipart; then what is S3's own: retries on 5xx and throttling, ETag checks, unfinished
 * multipart uploads swept, `s3://` locations parsed.
 */
import { storeContract } from "./store_contract.ts";
import { type S3Emulator, startS3Emulator } from "../support/s3_emulator.ts";
import { parseS3Location, S3_MIN_PART_BYTES } from "../../edge/deno/s3_store.ts";
import { getBytes, putBytes, StoreError } from "../../src/storage/store.ts";
import { assert, assertEquals, assertRejects, assertThrows } from "../support/assert.ts";
import { startRelay } from "../support/relay.ts";
import { CreateMultipartUploadCommand } from "@aws-sdk/client-s3";

let emulator: Promise<S3Emulator> | undefined;
let opened = 0;
/** One emulator for the file (its start costs ~1 s), a fresh prefix per test. */
async function shared(): Promise<S3Emulator> {
  emulator ??= startS3Emulator();
  return await emulator;
}

// The SDK keeps sockets alive between requests; the emulator runs in another process.
const testOptions = { sanitizeResources: false, sanitizeOps: false };

storeContract("s3", async () => {
  const s3 = await shared();
  const store = s3.store(`t${++opened}`, { partBytes: S3_MIN_PART_BYTES });
  return { store, [Symbol.asyncDispose]: () => Promise.resolve(store.client.destroy()) };
}, { largeBytes: 11 * 1024 * 1024, testOptions, racyOverwrites: true });

Deno.test({
  name:
    "s3 store: 5xx and throttling answers are retried with backoff; a lasting failure is a StoreError",
  ...testOptions,
  fn: async () => {
    const s3 = await shared();
    await using relay = await startRelay(s3.endpoint);
    const store = s3.store("retry", { client: { endpoint: relay.url } });
    try {
      relay.setFaults({
        "*": [{ kind: "status", status: 503, times: 1 }, {
          kind: "status",
          status: 429,
          times: 1,
        }],
      });
      await putBytes(store, "r/a", new TextEncoder().encode("kept"));
      relay.setFaults({ "*": { kind: "status", status: 500, times: 1 } });
      assertEquals(new TextDecoder().decode((await getBytes(store, "r/a"))!), "kept");
      relay.setFaults({ "*": { kind: "status", status: 503, times: 100 } });
      const error = await assertRejects(() => store.head("r/a"), StoreError, "HTTP 503");
      assert(!/S3RVER/.test(error.message), "no credentials in the message");
    } finally {
      store.client.destroy();
    }
  },
});

Deno.test({
  name: "s3 store: a whole read whose bytes do not match the ETag fails at its end",
  ...testOptions,
  fn: async () => {
    const s3 = await shared();
    const store = s3.store("etag");
    await using relay = await startRelay(s3.endpoint);
    const viaRelay = s3.store("etag", { client: { endpoint: relay.url } });
    try {
      await putBytes(store, "r/a", new TextEncoder().encode("x".repeat(10_000)));
      relay.setFaults({ "*": { kind: "corrupt", atByte: 5000, times: 1 } });
      const obj = (await viaRelay.get("r/a"))!;
      await assertRejects(() => new Response(obj.body).arrayBuffer(), Error, "ETag");
    } finally {
      store.client.destroy();
      viaRelay.client.destroy();
    }
  },
});

Deno.test({
  name:
    "s3 store: a multipart upload a killed node left unfinished is never visible; sweeping it where the store cannot list uploads answers 0",
  ...testOptions,
  fn: async () => {
    const s3 = await shared();
    const store = s3.store("sweep");
    try {
      await store.client.send(
        new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: "sweep/r/left.pack" }),
      );
      assertEquals(await store.list("r/"), [], "nothing visible");
      assertEquals(await store.head("r/left.pack"), null);
      // s3rver does not implement ListMultipartUploads (501); real S3 aborts them here.
      assertEquals(await store.sweepIncomplete("r/", Date.now() + 1000), 0);
    } finally {
      store.client.destroy();
    }
  },
});

Deno.test("s3 store: s3:// locations parsed; a directory is not one; bad names refused", () => {
  assertEquals(parseS3Location("s3://bucket/a/b/"), { bucket: "bucket", prefix: "a/b" });
  assertEquals(parseS3Location("s3://my.bucket"), { bucket: "my.bucket", prefix: "" });
  assertEquals(parseS3Location("/var/lib/gitedge"), null);
  assertThrows(() => parseS3Location("s3://Bad_Bucket/x"), StoreError);
  assertThrows(() => parseS3Location("s3://bucket/../x"), StoreError);
});

// The shared emulator stops with the last test of the file.
Deno.test({
  name: "s3 store: (the emulator stops)",
  ...testOptions,
  fn: async () => {
    if (emulator) await (await emulator).stop();
  },
});
