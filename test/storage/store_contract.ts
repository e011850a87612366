/**
 * The `PackStore` contract (src/storage/store.ts), shared by every store: the filesystem
 * (`fs_store_contract_test.ts`), S3 (`s3_store_contract_test.ts`, on an S3 emulator) and R2
 * (`r2_store_contract_test.ts`, in workerd through Miniflare). Each test file calls
 * `storeContract` once with a way to open a fresh, empty store.
 */
import { getBytes, type PackStore, putBytes, StoreError } from "../../src/storage/store.ts";
import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { SeededRandom } from "../support/random.ts";

export interface OpenedStore extends AsyncDisposable {
  store: PackStore;
}

export interface ContractOptions {
  /** Bytes of the "large" object: above the store's part size, so it goes multipart. */
  largeBytes: number;
  /** Extra `Deno.test` options (sanitizers for stores that run in other processes). */
  testOptions?: Partial<Deno.TestDefinition>;
  /**
   * Ranges that start at the very end read as empty and ranges past it are refused (the
   * filesystem and S3 stores). R2 refuses both, and zero-length ranges, as "not satisfiable": not checked there.
   */
  strictRanges?: boolean;
  /**
   * The server may keep an object's bytes and its ETag from different concurrent writers of one
   * key (s3rver, the S3 emulator: real S3 does not): then a read of it must fail (the ETag check),
   * never hand out a mix silently.
   */
  racyOverwrites?: boolean;
}

const enc = (s: string) => new TextEncoder().encode(s);
const text = async (body: ReadableStream<Uint8Array>) => await new Response(body).text();

function streamOf(...chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return ReadableStream.from(chunks);
}

/** A body that sends `chunks`, then fails. */
function failingBody(...chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(c);
      controller.error(new Error("the origin went away"));
    },
  });
}

export function storeContract(
  name: string,
  open: () => Promise<OpenedStore>,
  opts: ContractOptions,
): void {
  const test = (title: string, fn: (store: PackStore) => Promise<void>) =>
    Deno.test({
      name: `${name} store contract: ${title}`,
      ...opts.testOptions,
      fn: async () => {
        await using opened = await open();
        await fn(opened.store);
      },
    });

  test("put, get whole and by range, head, list by prefix, delete", async (store) => {
    assertEquals(await store.put("r/packs/a.pack", streamOf(enc("hello "), enc("world"))), {
      size: 11,
    });
    await putBytes(store, "r/manifest.json", enc("{}"));
    await putBytes(store, "other/x", enc("x"));
    assertEquals(
      new TextDecoder().decode((await getBytes(store, "r/packs/a.pack"))!),
      "hello world",
    );
    const part = (await store.get("r/packs/a.pack", { offset: 6, length: 3 }))!;
    assertEquals([part.size, await text(part.body)], [11, "wor"]);
    const tail = (await store.get("r/packs/a.pack", { offset: 6 }))!;
    assertEquals([tail.size, await text(tail.body)], [11, "world"]);
    const info = await store.head("r/packs/a.pack");
    assertEquals(info?.size, 11);
    assertEquals(info?.key, "r/packs/a.pack");
    assert(info!.modified > Date.now() - 3_600_000, `modified ${info!.modified} is recent`);
    assertEquals(await store.get("r/packs/none.pack"), null);
    assertEquals(await store.head("r/packs/none.pack"), null);
    assertEquals((await store.list("r/")).map((o) => o.key), ["r/manifest.json", "r/packs/a.pack"]);
    assertEquals((await store.list("r/packs/")).map((o) => [o.key, o.size]), [
      ["r/packs/a.pack", 11],
    ]);
    assertEquals((await store.list("r/p")).map((o) => o.key), ["r/packs/a.pack"]);
    await store.delete("r/packs/a.pack");
    await store.delete("r/packs/a.pack"); // a missing key is not an error
    assertEquals((await store.list("r/")).map((o) => o.key), ["r/manifest.json"]);
    assertEquals(await store.get("r/packs/a.pack"), null);
  });

  test("ranges at the edges: empty at the end, zero length; past the end refused", async (store) => {
    await putBytes(store, "k/v", enc("0123456789"));
    if (opts.strictRanges !== false) {
      const atEnd = (await store.get("k/v", { offset: 10 }))!;
      assertEquals([atEnd.size, await text(atEnd.body)], [10, ""]);
      const none = (await store.get("k/v", { offset: 3, length: 0 }))!;
      assertEquals([none.size, await text(none.body)], [10, ""]);
    }
    const last = (await store.get("k/v", { offset: 9, length: 5 }))!;
    assertEquals(await text(last.body), "9", "a length past the end stops at the end");
    if (opts.strictRanges !== false) {
      await assertRejects(() => store.get("k/v", { offset: 11 }), StoreError);
    }
    assertEquals(await store.get("k/none", { offset: 0, length: 1 }), null);
  });

  test("a put whose body fails publishes nothing and keeps the object it would replace", async (store) => {
    await putBytes(store, "r/p.pack", enc("old"));
    await assertRejects(() => store.put("r/p.pack", failingBody(enc("new but cut"))), Error);
    assertEquals(new TextDecoder().decode((await getBytes(store, "r/p.pack"))!), "old");
    await assertRejects(() => store.put("r/q.pack", failingBody(enc("cut"))), Error);
    assertEquals(await store.head("r/q.pack"), null);
    assertEquals((await store.list("r/")).map((o) => o.key), ["r/p.pack"]);
  });

  test("a large body goes whole (multipart where the store has it), ranges across parts", async (store) => {
    const rng = new SeededRandom(7);
    const big = rng.bytes(opts.largeBytes);
    // In uneven chunks, as a pack arrives.
    const chunks: Uint8Array[] = [];
    for (let at = 0; at < big.length;) {
      const n = Math.min(big.length - at, 1 + rng.int(300_000));
      chunks.push(big.subarray(at, at + n));
      at += n;
    }
    assertEquals(await store.put("big/p.pack", streamOf(...chunks)), { size: big.length });
    assertEquals((await store.head("big/p.pack"))?.size, big.length);
    const back = (await getBytes(store, "big/p.pack"))!;
    assertEquals(back.length, big.length);
    assert(back.every((b, i) => b === big[i]), "read back byte for byte");
    const mid = Math.floor(big.length / 2) - 1000;
    const slice = (await store.get("big/p.pack", { offset: mid, length: 5000 }))!;
    const got = new Uint8Array(await new Response(slice.body).arrayBuffer());
    assertEquals(slice.size, big.length);
    assert(got.length === 5000 && got.every((b, i) => b === big[mid + i]), "the range");
    // A large body that fails after its first parts publishes nothing either.
    await assertRejects(
      () => store.put("big/cut.pack", failingBody(big.subarray(0, opts.largeBytes))),
      Error,
    );
    assertEquals(await store.head("big/cut.pack"), null);
  });

  test("a rewrite changes the version, even to the same size", async (store) => {
    await putBytes(store, "v/x", enc("aaaa"));
    const first = await store.head("v/x");
    await new Promise((r) => setTimeout(r, 20));
    await putBytes(store, "v/x", enc("bbbb"));
    const second = await store.head("v/x");
    assert(first?.version !== undefined, "a version");
    assert(first!.version !== second!.version, `${first!.version} then ${second!.version}`);
    assertEquals(new TextDecoder().decode((await getBytes(store, "v/x"))!), "bbbb");
  });

  test("concurrent writes of one key: the last whole body wins, never a mix", async (store) => {
    const bodies = Array.from({ length: 4 }, (_, i) => enc(String(i).repeat(40_000)));
    await Promise.all(
      bodies.map((b) => store.put("c/entry", streamOf(b.subarray(0, 1), b.subarray(1)))),
    );
    let got: string;
    try {
      got = new TextDecoder().decode((await getBytes(store, "c/entry"))!);
    } catch (error) {
      assert(opts.racyOverwrites === true && error instanceof StoreError, `read failed: ${error}`);
      return;
    }
    assert(/^(0+|1+|2+|3+)$/.test(got) && got.length === 40_000, "one whole body");
  });

  test("keys that escape or are not keys are refused", async (store) => {
    for (const bad of ["../x", "/abs", "a//b", "a/../b", "a b", ""]) {
      await assertRejects(() => putBytes(store, bad, enc("x")), StoreError);
      await assertRejects(() => store.get(bad), StoreError);
    }
  });
}
