/**
 * The fleet's leases and counters in Redis (edge/deno/redis_fleet.ts) against Debian's
 * redis-server: leases only their holder renews or releases, expiry on the server's clock,
 * counters, and a server gone away failing commands at once rather than queueing them.
 */
import { assert, assertEquals, assertRejects } from "../../support/assert.ts";
import { redisMissing, startRedis } from "../../support/redis_server.ts";
import { skipped } from "../../support/skips.ts";
import { describeCoordinator, RedisFleetState } from "../../../edge/deno/redis_fleet.ts";

const missing = await redisMissing();
if (missing) skipped("redis_fleet_test", "redis-server is not installed (.ci/run installs it)");
// The client's socket closes after the test's end is reported.
const LEAKY = { sanitizeResources: false, sanitizeOps: false };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test({
  name:
    "redis fleet state: leases renewed and released by their holder only, expiring on the server's clock; counters",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using redis = await startRedis();
    await using state = new RedisFleetState({ url: redis.url, namespace: "t" });
    assert(await state.connect(), "connected");
    // Leases of 1.5 s: the checks below fit in one on a loaded machine.
    assert(await state.acquire("build:r", "a", 1500));
    assertEquals(await state.acquire("build:r", "b", 1500), false, "held by a");
    assertEquals(await state.holder("build:r"), "a");
    assertEquals(await state.renew("build:r", "b", 5000), false, "b cannot renew a's lease");
    await state.release("build:r", "b");
    assertEquals(await state.holder("build:r"), "a", "b cannot release a's lease");
    assert(await state.renew("build:r", "a", 1500));
    await sleep(1700);
    assertEquals(await state.holder("build:r"), null, "expired");
    assertEquals(await state.renew("build:r", "a", 300), false, "an expired lease is not renewed");
    assert(await state.acquire("build:r", "b", 5000), "b takes it over");
    await state.release("build:r", "b");
    assertEquals(await state.holder("build:r"), null);
    assertEquals(await state.count("published:r"), 0);
    assertEquals([await state.incr("published:r"), await state.incr("published:r")], [1, 2]);
    // Fleets sharing one Redis keep apart by namespace.
    await using other = new RedisFleetState({ url: redis.url, namespace: "u" });
    await other.connect();
    assertEquals(await other.count("published:r"), 0);
  },
});

Deno.test({
  name:
    "redis fleet state: a server gone away fails commands at once; they work again once it is back",
  ignore: missing,
  ...LEAKY,
  fn: async () => {
    await using redis = await startRedis();
    await using state = new RedisFleetState({ url: redis.url, namespace: "t", timeoutMs: 1000 });
    await state.connect();
    await redis.kill();
    await sleep(100);
    const started = Date.now();
    await assertRejects(() => state.acquire("build:r", "a", 1000), Error);
    assert(Date.now() - started < 3000, "failed within the command bound (1 s), not hung");
    await redis.restart();
    const until = Date.now() + 10_000;
    let ok = false;
    while (!ok && Date.now() < until) {
      ok = await state.acquire("build:r", "a", 1000).catch(() => false);
      if (!ok) await sleep(100);
    }
    assert(ok, "acquired once the server was back");
  },
});

Deno.test("redis fleet state: the coordinator URL is described without its credentials", () => {
  assertEquals(
    describeCoordinator("redis://user:s3cret@cache.internal:6379/2"),
    "redis://cache.internal:6379/2",
  );
});
