/** `windowedTee` (src/proxy/core/streams.ts): what a slow side may cost, whatever the size. */
import { windowedTee } from "../../../src/proxy/core/streams.ts";
import { assert, assertEquals, assertRejects } from "../../support/assert.ts";
import { collect } from "../../support/streams.ts";

/** A source of `count` chunks of `size` bytes that counts how many were pulled from it. */
function countedSource(count: number, size: number) {
  const state = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (state.pulled === count) return controller.close();
      controller.enqueue(new Uint8Array(size).fill(state.pulled++ & 0xff));
    },
    cancel() {
      state.cancelled = true;
    },
  }, { highWaterMark: 0 });
  return { stream, state };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("windowedTee: a client that reads slowly holds the source back; the copy gets what it read", async () => {
  // Fails with ReadableStream.tee(): the copy's reads pulled all 64 chunks (4 MiB) from the
  // source, buffered for the client that had read 2.
  const { stream, state } = countedSource(64, 64 * 1024);
  const [client, copy] = windowedTee(stream, 1 << 20);
  const copied = collect(copy);
  const reader = client.getReader();
  await reader.read();
  await reader.read();
  for (let i = 0; i < 10; i++) await tick();
  assert(state.pulled <= 4, `pulled ${state.pulled} chunks while the client read 2`);
  let n = 2;
  while (!(await reader.read()).done) n++;
  assertEquals(n, 64);
  assertEquals((await copied).byteLength, 64 * 64 * 1024, "the copy is whole");
});

Deno.test("windowedTee: a copy that falls a window behind is dropped; the client gets everything", async () => {
  const { stream } = countedSource(40, 64 * 1024);
  const [client, copy] = windowedTee(stream, 256 * 1024);
  const copyReader = copy.getReader(); // never read: a stalled store
  assertEquals((await collect(client)).byteLength, 40 * 64 * 1024);
  await assertRejects(
    async () => {
      while (!(await copyReader.read()).done);
    },
    Error,
    "fell more than 262144 bytes behind",
  );
});

Deno.test("windowedTee: when the client goes away, the copy still gets the whole answer", async () => {
  const { stream, state } = countedSource(20, 1024);
  const [client, copy] = windowedTee(stream, 1 << 20);
  const reader = client.getReader();
  await reader.read();
  await reader.cancel();
  assertEquals((await collect(copy)).byteLength, 20 * 1024);
  assertEquals(state.pulled, 20);
});

Deno.test("windowedTee: a source that fails errors both sides", async () => {
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(new Uint8Array(10));
      c.error(new Error("origin went away"));
    },
  });
  const [client, copy] = windowedTee(stream, 1024);
  await assertRejects(() => collect(client), Error, "origin went away");
  await assertRejects(() => collect(copy), Error, "origin went away");
});
