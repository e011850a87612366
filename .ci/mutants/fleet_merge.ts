/**
 * Mutants: the fleet's merged registry (counts, times, pins against evictions, in Redis) and its
 * one sweeper (every sweep under the lease).
 */
import type { Mutant } from "./mutant.ts";

const REDIS_REGISTRY = "test/edge/deno/redis_registry_test.ts";
const FLEET_MERGE = "test/edge/deno/fleet_merge_test.ts";
const FLEET_UNIT = "test/proxy/snapshots/fleet_coordinator_test.ts";
const REDIS = "edge/deno/redis_fleet.ts";
const REGISTRY = "src/proxy/ops/repo_registry.ts";

export const FLEET_MERGE_MUTANTS: Mutant[] = [
  {
    name: "fleet-merge/counts-overwritten",
    file: REDIS,
    from:
      "  if fresh and ARGV[6 + i] ~= '0' then redis.call('hincrby', k, names[i], ARGV[6 + i]) end",
    to: "  if fresh and ARGV[6 + i] ~= '0' then redis.call('hset', k, names[i], ARGV[6 + i]) end",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/last-clone-goes-back",
    file: REDIS,
    from: "if ARGV[5] ~= '' and (num('lastClonedAt') or -1) < tonumber(ARGV[5]) then",
    to: "if ARGV[5] ~= '' then",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/pin-while-evicting",
    file: REDIS,
    from: "const PIN = `if redis.call('exists', KEYS[2]) == 1 then return 0 end",
    to: "const PIN = `if false then return 0 end",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/pin-after-eviction",
    file: REDIS,
    from:
      "if ARGV[2] ~= '' and tonumber(redis.call('get', KEYS[3]) or '0') ~= tonumber(ARGV[2]) then",
    to: "if false then",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/evict-pinned",
    file: REDIS,
    from:
      "const BEGIN_EVICTION = `if tonumber(redis.call('get', KEYS[1]) or '0') > tonumber(ARGV[1]) then",
    to: "const BEGIN_EVICTION = `if false then",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/no-clock-slack",
    file: REGISTRY,
    from:
      "      marked = await this.#shared.beginEviction(id, now - FLEET_CLOCK_SLACK_MS, EVICTING_MS);",
    to: "      marked = await this.#shared.beginEviction(id, now, EVICTING_MS);",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/evict-despite-fleet-pin",
    file: REGISTRY,
    from: "    if (!marked) this.#evicting.delete(id);\n    return marked;",
    to: "    return true;",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/fleet-pin-ignored",
    file: REGISTRY,
    from: "      return await this.#shared.pin(repo.id, untilMs, epoch.fleet);",
    to: "      await this.#shared.pin(repo.id, untilMs, epoch.fleet);\n      return true;",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/store-copy-not-seeded",
    file: REGISTRY,
    from: "      if (copy) record = (await shared.merge(copy, countsOf(copy)))?.record ?? record;",
    to:
      "      if (copy && false) record = (await shared.merge(copy, countsOf(copy)))?.record ?? record;",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/registry-per-node",
    file: "src/proxy/app.ts",
    from: "new RepoRegistry(deps.store, deps.clock, deps.fleet?.registry);",
    to: "new RepoRegistry(deps.store, deps.clock);",
    tests: [FLEET_MERGE],
    filter: "fleet registry",
  },
  {
    name: "fleet-merge/sweep-without-lease",
    file: "src/proxy/ops/store_eviction.ts",
    from: "      if (this.#deps.exclusive) await this.#deps.exclusive(sweeps);",
    to: "      if (false) await this.#deps.exclusive!(sweeps);",
    tests: [FLEET_MERGE],
    filter: "fleet sweeps",
  },
  {
    name: "fleet-merge/exclusive-without-lease",
    file: "src/proxy/snapshots/fleet_coordinator.ts",
    from: "    if (!await state.acquire(name, token, ttlMs)) return false;",
    to: "    if (!await state.acquire(name, token, ttlMs) && false) return false;",
    tests: [FLEET_UNIT],
  },
  {
    name: "fleet-merge/url-no-leeway",
    file: "src/proxy/core/signing.ts",
    from: "expires + this.#leeway < nowSeconds",
    to: "expires < nowSeconds",
    tests: [FLEET_MERGE],
    filter: "clocks 8",
  },
  {
    name: "fleet-merge/fetch-ignores-fleet-pin",
    file: "src/proxy/fetch/git_routes.ts",
    from: '      plan.action === "stream-snapshot") && !await pinSnapshot(ctx, repo, epoch)',
    to:
      '      plan.action === "stream-snapshot") && !(await pinSnapshot(ctx, repo, epoch) || true)',
    tests: [FLEET_MERGE],
    filter: "another node evicts",
  },
  {
    name: "fleet-merge/batch-added-twice",
    file: REDIS,
    from: "local fresh = #KEYS < 4 or redis.call('set', KEYS[4], '1', 'NX', 'PX', 600000) ~= false",
    to: "local fresh = true",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/unsent-counted-again",
    file: REGISTRY,
    from:
      "        if (e.unsent?.delta !== delta) { for (const k of COUNT_KEYS) e.delta[k] += delta[k]; }",
    to: "        { for (const k of COUNT_KEYS) e.delta[k] += delta[k]; }",
    tests: [REDIS_REGISTRY],
  },
  {
    name: "fleet-merge/store-full-per-node",
    file: "src/proxy/app.ts",
    from: "    fleetFull: deps.fleet?.storeFull,",
    to: "    fleetFull: undefined,",
    tests: [FLEET_MERGE],
    filter: "fleet store full",
  },
  {
    // S3 keeps whole seconds: of two snapshots written in one second, only one spared as fresh.
    name: "fleet-merge/fresh-tie-spares-one",
    file: "src/proxy/ops/store_eviction.ts",
    from: "        if (fresh.has(id)) {",
    to: "        if ([...fresh][0] === id) {",
    tests: ["test/proxy/ops/store_eviction_ties_test.ts"],
  },
];
