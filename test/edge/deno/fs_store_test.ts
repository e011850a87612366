/**
 * The filesystem store on its own: what the PackStore interface promises (atomic puts, ranges,
 * prefixes, versions that change on rewrite, sweeping what a killed put left), on a real directory.
 */
import { FsPackStore } from "../../../edge/deno/fs_store.ts";
import { getBytes, StoreError } from "../../../src/storage/store.ts";
import { assert, assertEquals, assertRejects } from "../../support/assert.ts";
import { tempDir } from "../../support/git.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = async (body: ReadableStream<Uint8Array>) => await new Response(body).text();

function streamOf(...chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return ReadableStream.from(chunks);
}

Deno.test("fs store: put, get whole and by range, head, list by prefix, delete", async () => {
  await using dir = await tempDir();
  const store = new FsPackStore(dir.path);
  assertEquals(await store.put("r/packs/a.pack", streamOf(bytes("hello "), bytes("world"))), {
    size: 11,
  });
  await store.put("r/manifest.json", streamOf(bytes("{}")));
  await store.put("other/x", streamOf(bytes("x")));

  assertEquals(new TextDecoder().decode((await getBytes(store, "r/packs/a.pack"))!), "hello world");
  const part = (await store.get("r/packs/a.pack", { offset: 6, length: 3 }))!;
  assertEquals([part.size, await text(part.body)], [11, "wor"]);
  const tail = (await store.get("r/packs/a.pack", { offset: 6 }))!;
  assertEquals(await text(tail.body), "world");
  assertEquals((await store.head("r/packs/a.pack"))?.size, 11);
  assertEquals(await store.get("r/packs/none.pack"), null);
  assertEquals(await store.head("r/packs/none.pack"), null);

  assertEquals((await store.list("r/")).map((o) => o.key).sort(), [
    "r/manifest.json",
    "r/packs/a.pack",
  ]);
  await store.delete("r/packs/a.pack");
  await store.delete("r/packs/a.pack"); // a missing key is not an error
  assertEquals((await store.list("r/")).map((o) => o.key), ["r/manifest.json"]);
});

Deno.test("fs store: a put whose body fails leaves nothing, not even a partial object", async () => {
  await using dir = await tempDir();
  const store = new FsPackStore(dir.path);
  await store.put("r/p.pack", streamOf(bytes("old")));
  const failing = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes("new but cut"));
      controller.error(new Error("the origin went away"));
    },
  });
  await assertRejects(() => store.put("r/p.pack", failing), Error, "the origin went away");
  assertEquals(new TextDecoder().decode((await getBytes(store, "r/p.pack"))!), "old");
  assertEquals(await store.sweepIncomplete("r/", Date.now() + 1000), 0, "no temporary left");
});

Deno.test("fs store: a rewrite to the same size changes the version", async () => {
  await using dir = await tempDir();
  const store = new FsPackStore(dir.path);
  await store.put("r/p.pack", streamOf(bytes("aaaa")));
  const before = (await store.head("r/p.pack"))!;
  await store.put("r/p.pack", streamOf(bytes("bbbb")));
  const after = (await store.head("r/p.pack"))!;
  assertEquals(after.size, before.size);
  assert(before.version !== undefined);
  assert(after.version !== before.version, "a rewrite is a new version");
});

Deno.test("fs store: keys that could leave the store are refused", async () => {
  await using dir = await tempDir();
  const store = new FsPackStore(dir.path);
  for (const key of ["../x", "/abs", "a/../../x", "a//b", "a\\b", ""]) {
    await assertRejects(() => store.put(key, streamOf(bytes("x"))), StoreError);
  }
});

Deno.test("fs store: sweepIncomplete removes only old temporaries a killed put left", async () => {
  await using dir = await tempDir();
  const store = new FsPackStore(dir.path);
  await store.put("r/p.pack", streamOf(bytes("kept")));
  await Deno.writeTextFile(`${dir.path}/r/q.pack.0f00.tmp`, "half");
  assertEquals(await store.sweepIncomplete("r/", Date.now() - 60_000), 0, "too young to sweep");
  assertEquals(await store.sweepIncomplete("r/", Date.now() + 1000), 1);
  assertEquals((await store.list("r/")).map((o) => o.key), ["r/p.pack"]);
});
