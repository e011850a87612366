import { assertEquals } from "../support/assert.ts";
import { interleaved, median } from "../../bench/harness/stats.ts";

Deno.test("bench median: middle value, or the mean of the two middle values", () => {
  assertEquals(median([3, 1, 2]), 2);
  assertEquals(median([4, 1, 3, 2]), 2.5);
  assertEquals(median([5]), 5);
});

Deno.test("bench interleaving: one run of each competitor per round, rotating the order", async () => {
  const order: string[] = [];
  const make = (name: string) => () => {
    order.push(name);
    return Promise.resolve(order.length);
  };
  const results = await interleaved(3, [make("a"), make("b"), make("c")]);
  assertEquals(order, ["a", "b", "c", "b", "c", "a", "c", "a", "b"]);
  assertEquals(results, [[1, 6, 8], [2, 4, 9], [3, 5, 7]]);
});
