import { assert, assertEquals, assertRejects } from "../support/assert.ts";
import { runPool, settleAll } from "../../src/client/pool.ts";
import { sleep } from "../../src/client/backoff.ts";

Deno.test("runPool keeps at most N tasks in flight and returns results in order", async () => {
  let active = 0;
  let peak = 0;
  const tasks = Array.from({ length: 9 }, (_, i) => async () => {
    active++;
    peak = Math.max(peak, active);
    await sleep((9 - i) * 2);
    active--;
    return i * 10;
  });
  const results = await runPool(tasks, { concurrency: 3 });
  assertEquals(results, [0, 10, 20, 30, 40, 50, 60, 70, 80]);
  assertEquals(peak, 3);
});

Deno.test("runPool aborts the rest on the first failure and waits for tasks in flight", async () => {
  const boom = new Error("boom");
  const started: number[] = [];
  let settledAfterAbort = 0;
  const tasks = Array.from({ length: 6 }, (_, i) => async (signal: AbortSignal) => {
    started.push(i);
    if (i === 1) {
      await sleep(5);
      throw boom;
    }
    try {
      await sleep(1_000, signal);
    } finally {
      settledAfterAbort++;
    }
    return i;
  });
  const error = await assertRejects(() => runPool(tasks, { concurrency: 2 }));
  assertEquals(error, boom);
  assertEquals(started, [0, 1]);
  assertEquals(settledAfterAbort, 1, "the task in flight settled before runPool rejected");
});

Deno.test("runPool honours an outer abort signal", async () => {
  const controller = new AbortController();
  const reason = new Error("stop");
  const running = runPool(
    [(signal: AbortSignal) => sleep(1_000, signal), (signal: AbortSignal) => sleep(1_000, signal)],
    { concurrency: 1, signal: controller.signal },
  );
  controller.abort(reason);
  assertEquals(await assertRejects(() => running), reason);
});

Deno.test("runPool with no tasks resolves to an empty list", async () => {
  assert(Array.isArray(await runPool([], { concurrency: 4 })));
  assertEquals(await runPool<number>([], { concurrency: 4 }), []);
});

Deno.test("settleAll throws the first failure only after every promise settled", async () => {
  let slowDone = false;
  const slow = new Promise<number>((r) =>
    setTimeout(() => {
      slowDone = true;
      r(1);
    }, 30)
  );
  const failing = Promise.reject(new Error("boom"));
  let caught: unknown;
  try {
    await settleAll<[number, never]>([slow, failing]);
  } catch (e) {
    caught = e;
  }
  assert(caught instanceof Error && caught.message === "boom", "first failure thrown");
  assert(slowDone, "the slow promise had settled first");
  assertEquals(await settleAll<[number, string]>([Promise.resolve(1), Promise.resolve("a")]), [
    1,
    "a",
  ]);
});
