/**
 * Health endpoints for load balancers and orchestrators, on every runtime:
 *
 * - `GET /_edge/health/live` (liveness): 200 whenever the process answers at all. Restart the
 *   edge when it fails.
 * - `GET /_edge/health/ready` (readiness): 200 when the edge can serve, 503 when it should get no
 *   new traffic: it is draining (the Deno server after SIGTERM), its store is not writable, or it
 *   has no signing key (a Worker without `EDGE_SIGNING_KEY`).
 *
 * Both are unauthenticated and cheap: they never reach the origin; readiness writes an object of
 * {@link STORE_PROBE_BYTES} to the store and reads it back (a store that takes an empty write but
 * not an answer's worth of bytes, as a full disk does, is not writable) at most every {@link STORE_PROBE_TTL.okMs} (a failed write is tried again
 * after {@link STORE_PROBE_TTL.failMs}), shared by every probe in the meantime. Bodies are JSON
 * naming each check, with no server paths.
 */
import type { Clock } from "../core/deps.ts";
import { getBytes, type PackStore, putBytes } from "../../storage/store.ts";

export const HEALTH_ROUTES = {
  live: "/_edge/health/live",
  ready: "/_edge/health/ready",
} as const;

/** How long a store probe's outcome stands, in ms. */
export const STORE_PROBE_TTL = { okMs: 30_000, failMs: 2_000 } as const;

/** The key the store probe writes. */
export const STORE_PROBE_KEY = "health/probe";

/** Size of the object the store probe writes and reads back: about a small fetch answer. */
export const STORE_PROBE_BYTES = 64 * 1024;

/** The probe's bytes: different on every probe, so a stale object does not read back as new. */
function probeBytes(now: number): Uint8Array {
  const bytes = new Uint8Array(STORE_PROBE_BYTES);
  const stamp = new TextEncoder().encode(`${now} ${crypto.randomUUID()}\n`);
  for (let at = 0; at < bytes.length; at += stamp.length) {
    bytes.set(stamp.subarray(0, bytes.length - at), at);
  }
  return bytes;
}

/** What readiness looks at. */
export interface ReadinessDeps {
  store: PackStore;
  clock: Clock;
  signingKey?: Uint8Array;
  /** True once the edge stops taking new work (the Deno server's drain). */
  draining?: () => boolean;
}

/** Each check: `ok` or why not. */
export type ReadinessChecks = Record<"draining" | "store" | "signingKey", string>;

/** Whether the store takes a write, remembered for a while and shared by concurrent probes. */
export class StoreProbe {
  #until = 0;
  #result: { ok: boolean; error?: unknown } = { ok: false };
  #running: Promise<{ ok: boolean; error?: unknown }> | null = null;

  constructor(readonly ttl: { okMs: number; failMs: number } = STORE_PROBE_TTL) {}

  /** Writes and reads back a probe object unless a recent probe answered; never throws. */
  async check(store: PackStore, clock: Clock): Promise<{ ok: boolean; error?: unknown }> {
    if (clock.now() < this.#until) return this.#result;
    this.#running ??= (async () => {
      let result: { ok: boolean; error?: unknown };
      try {
        const bytes = probeBytes(clock.now());
        await putBytes(store, STORE_PROBE_KEY, bytes);
        const back = await getBytes(store, STORE_PROBE_KEY);
        if (
          !back || back.byteLength !== bytes.byteLength || !back.every((b, i) => b === bytes[i])
        ) {
          throw new Error(
            `the store probe read back ${back?.byteLength ?? "no"} bytes, not those written`,
          );
        }
        result = { ok: true };
      } catch (error) {
        result = { ok: false, error };
      }
      this.#result = result;
      this.#until = clock.now() + (result.ok ? this.ttl.okMs : this.ttl.failMs);
      this.#running = null;
      return result;
    })();
    return await this.#running;
  }
}

/** The readiness checks, and whether all pass. */
export async function readiness(
  deps: ReadinessDeps,
  probe: StoreProbe,
): Promise<{ ready: boolean; checks: ReadinessChecks; storeError?: unknown }> {
  const draining = deps.draining?.() ?? false;
  const keyLoaded = (deps.signingKey?.byteLength ?? 0) >= 16;
  // Draining or keyless, the answer is already no: spare the store the write.
  const store = draining || !keyLoaded
    ? { ok: true, skipped: true }
    : await probe.check(deps.store, deps.clock);
  const checks: ReadinessChecks = {
    draining: draining ? "draining" : "ok",
    store: "skipped" in store ? "not checked" : store.ok ? "ok" : "not writable",
    signingKey: keyLoaded ? "ok" : "not loaded",
  };
  const ready = !draining && keyLoaded && store.ok;
  return {
    ready,
    checks,
    ...(store.ok ? {} : { storeError: (store as { error?: unknown }).error }),
  };
}

const NO_STORE = { "cache-control": "no-store", "content-type": "application/json" };

/** The liveness answer. */
export function liveResponse(): Response {
  return new Response(JSON.stringify({ status: "live" }) + "\n", { headers: NO_STORE });
}

/** The readiness answer: 200 when ready, else 503 with the checks that failed. */
export function readyResponse(ready: boolean, checks: Record<string, string>): Response {
  const body = { status: ready ? "ready" : "not ready", checks };
  return new Response(JSON.stringify(body) + "\n", {
    status: ready ? 200 : 503,
    headers: ready ? NO_STORE : { ...NO_STORE, "retry-after": "5" },
  });
}
