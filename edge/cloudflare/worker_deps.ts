/** The edge app's dependencies for one Worker request, built from the Worker's bindings. */
import type { EdgeDeps } from "../../src/proxy/core/deps.ts";
import type { Metrics } from "../../src/proxy/core/metrics.ts";
import { DurableObjectCoordinator } from "./durable_object_coordinator.ts";
import { type Env, workerSettings } from "./env.ts";
import { R2PackStore } from "./r2_store.ts";
import type { ExecutionContext } from "./worker_types.ts";
import { workerLogger } from "./worker_log.ts";

/**
 * R2 store, Durable Object coordinator, `fetch` to the origin, the wall clock, the signing key
 * secret, config from vars, and `ctx.waitUntil` for background work. Builds started from here
 * are counted in `metrics`. Throws `SettingError` when a var is missing or malformed.
 */
export function edgeDepsFromEnv(env: Env, ctx: ExecutionContext, metrics?: Metrics): EdgeDeps {
  const settings = workerSettings(env);
  return {
    store: new R2PackStore(env.PACKS, { partBytes: settings.r2PartMiB * 1024 * 1024 }),
    coordinator: new DurableObjectCoordinator(env.REPO_SNAPSHOTS, metrics),
    originFetch: (request) => fetch(request),
    clock: { now: () => Date.now() },
    signingKey: settings.signingKey,
    config: settings.config,
    waitUntil: (promise) => ctx.waitUntil(promise),
    log: workerLogger(settings.logLevel),
  };
}
