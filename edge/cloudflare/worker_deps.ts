/** The edge app's dependencies for one Worker request, built from the Worker's bindings. */
import type { EdgeDeps, Sha256Stream } from "../../src/proxy/core/deps.ts";
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
    sha256: digestStreamSha256,
  };
}

/** Workers' native streaming digest (`crypto.DigestStream`). */
function digestStreamSha256(): Sha256Stream {
  const stream = new (crypto as unknown as { DigestStream: DigestStreamClass }).DigestStream(
    "SHA-256",
  );
  const writer = stream.getWriter();
  let failed: unknown = null;
  return {
    update: (chunk) => {
      writer.write(chunk.slice()).catch((error) => failed ??= error);
    },
    digest: async () => {
      await writer.close();
      if (failed) throw failed;
      return new Uint8Array(await stream.digest);
    },
  };
}

/** `crypto.DigestStream` of the Workers runtime: a WritableStream whose `digest` resolves at close. */
type DigestStreamClass = new (algorithm: string) => WritableStream<Uint8Array> & {
  digest: Promise<ArrayBuffer>;
};
