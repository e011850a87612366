import { assert, assertEquals, assertRejects } from "./assert.ts";
import { DeadlineError, withinDeadline } from "./deadline.ts";

Deno.test("withinDeadline fails a promise that never settles and passes outcomes through", async () => {
  const never = new Promise<never>(() => {});
  const error = await assertRejects(withinDeadline(never, "a hang", 20), DeadlineError);
  assert(error.message.includes("a hang: no outcome after 20 ms"), error.message);
  assertEquals(await withinDeadline(Promise.resolve(7), "a value"), 7);
  await assertRejects(withinDeadline(Promise.reject(new RangeError("x")), "a failure"), RangeError);
});
