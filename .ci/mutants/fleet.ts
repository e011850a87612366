/** Mutants: the fleet of Deno edges on one store (leases, fenced publish, fills, S3 checks). */
import type { Mutant } from "./mutant.ts";

const FLEET_UNIT = "test/proxy/snapshots/fleet_coordinator_test.ts";
const REDIS = "test/edge/deno/redis_fleet_test.ts";
const S3 = "test/storage/s3_store_contract_test.ts";
const COORDINATOR = "src/proxy/snapshots/fleet_coordinator.ts";

export const FLEET_MUTANTS: Mutant[] = [
  {
    name: "fleet/build-without-lease",
    file: COORDINATOR,
    from: "      if (await this.#ask(repo, () => state.acquire(lease, token, leaseMs))) {",
    to: "      if ((await this.#ask(repo, () => state.acquire(lease, token, leaseMs))) || true) {",
    tests: [FLEET_UNIT],
  },
  {
    name: "fleet/acquire-without-second-look",
    file: COORDINATOR,
    from: "        if (landed) {",
    to: "        if (landed && false) {",
    tests: [FLEET_UNIT],
  },
  {
    name: "fleet/fence-open",
    file: COORDINATOR,
    from: "    if (!held) throw new LeaseLostError(",
    to: "    if (held === null) throw new LeaseLostError(",
    tests: [FLEET_UNIT],
  },
  {
    name: "fleet/holds-by-own-record",
    file: COORDINATOR,
    from:
      "    return this.#held.has(repoId) &&\n      await this.#fleet.state.holder(buildLease(repoId)) === this.#fleet.token;",
    to: "    return this.#held.has(repoId);",
    tests: [FLEET_UNIT],
  },
  {
    name: "fleet/fill-rewritten",
    file: COORDINATOR,
    from: "    if (!taken) {",
    to: "    if (taken === null) {",
    tests: [FLEET_UNIT],
  },
  {
    name: "fleet/publish-unseen",
    file: COORDINATOR,
    from:
      "    const stale = gen !== undefined && published !== null && published !== gen.published &&",
    to:
      "    const stale = false && gen !== undefined && published !== null && published !== gen.published &&",
    tests: [FLEET_UNIT],
  },
  {
    name: "fleet/redis-renew-any-holder",
    file: "edge/deno/redis_fleet.ts",
    from: "const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then",
    to: "const RENEW = `if redis.call('get', KEYS[1]) then",
    tests: [REDIS],
  },
  {
    name: "fleet/redis-release-any-holder",
    file: "edge/deno/redis_fleet.ts",
    from: "const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then",
    to: "const RELEASE = `if true then",
    tests: [REDIS],
  },
  {
    name: "fleet/sweep-never-runs",
    file: COORDINATOR,
    from: "    if (!await state.acquire(name, token, ttlMs)) return false;",
    to: "    if (name) return false;",
    tests: ["test/edge/deno/fleet_test.ts"],
    filter: "cap holds",
  },
  {
    name: "s3/read-etag-unchecked",
    file: "edge/deno/s3_store.ts",
    from: "      if (got !== etag) {\n        controller.error(",
    to: "      if (got === null) {\n        controller.error(",
    tests: [S3],
    filter: "ETag",
  },
];
