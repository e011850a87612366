/**
 * `RedisFleetState`: the fleet's leases and counters (`FleetState`,
 * src/proxy/snapshots/fleet_coordinator.ts) in Redis or Valkey, selected by
 * `--coordinator redis://[user:password@]host:port[/db]` (`rediss://` for TLS). Through the
 * `redis` client from npm (node-redis, Redis's own client).
 *
 * A lease is one key `SET NX PX`: it expires on the server's clock, so the nodes' clocks may be
 * seconds apart. Renewal and release compare the holder's token in a Lua script (atomic on the
 * server). Commands are not queued while the server is away (`disableOfflineQueue`) and each is
 * bounded by `timeoutMs`: a node cut off from Redis learns it at once, serves what it knows and
 * builds nothing. The URL's password is never logged (`describe()` leaves it out).
 */
import { createClient } from "redis";
import type { FleetState } from "../../src/proxy/snapshots/fleet_coordinator.ts";

const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1]) else return 0 end`;

/** The URL without its credentials, for logs. */
export function describeCoordinator(text: string): string {
  const url = new URL(text);
  url.username = "";
  url.password = "";
  return url.toString();
}

export interface RedisFleetOptions {
  url: string;
  /** Prepended to every key (fleets sharing one Redis keep apart by it). */
  namespace: string;
  /** Bound of each command (ms). */
  timeoutMs?: number;
}

export class RedisFleetState implements FleetState, AsyncDisposable {
  readonly #client;
  readonly #ns: string;
  readonly #timeoutMs: number;
  #connecting: Promise<unknown> | null = null;

  constructor(opts: RedisFleetOptions) {
    this.#ns = `gitedge:${opts.namespace}:`;
    this.#timeoutMs = opts.timeoutMs ?? 2000;
    this.#client = createClient({
      url: opts.url,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: this.#timeoutMs,
        // Reconnect for ever, backing off to 2 s: the fleet works again once Redis is back.
        reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 6), 2000),
      },
    });
    // Errors are answered per command; the client's own (reconnects) would end the process.
    this.#client.on("error", () => {});
  }

  /** Connects (once); a server away at start is not fatal: commands fail until it is back. */
  async connect(): Promise<boolean> {
    this.#connecting ??= this.#client.connect().catch(() => {});
    return await this.#bounded(this.#connecting).then(() => this.#client.isReady, () => false);
  }

  #bounded<T>(work: Promise<T>): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the coordinator did not answer in ${this.#timeoutMs} ms`)),
        this.#timeoutMs,
      );
    });
    return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
  }

  async #run<T>(call: () => Promise<T>): Promise<T> {
    if (!this.#client.isReady) {
      this.#connecting ??= this.#client.connect().catch(() => {});
      throw new Error("the coordinator is not connected");
    }
    return await this.#bounded(call());
  }

  async acquire(name: string, token: string, ttlMs: number): Promise<boolean> {
    const answer = await this.#run(() =>
      this.#client.set(this.#ns + name, token, {
        condition: "NX",
        expiration: { type: "PX", value: ttlMs },
      })
    );
    return answer === "OK";
  }

  async renew(name: string, token: string, ttlMs: number): Promise<boolean> {
    const answer = await this.#run(() =>
      this.#client.eval(RENEW, { keys: [this.#ns + name], arguments: [token, String(ttlMs)] })
    );
    return Number(answer) === 1;
  }

  async release(name: string, token: string): Promise<void> {
    await this.#run(() =>
      this.#client.eval(RELEASE, { keys: [this.#ns + name], arguments: [token] })
    );
  }

  async holder(name: string): Promise<string | null> {
    const value = await this.#run(() => this.#client.get(this.#ns + name));
    return value === null ? null : String(value);
  }

  async incr(name: string): Promise<number> {
    return Number(await this.#run(() => this.#client.incr(this.#ns + name)));
  }

  async count(name: string): Promise<number> {
    const value = await this.#run(() => this.#client.get(this.#ns + name));
    return value === null ? 0 : Number(value);
  }

  /** Disconnects at once (and stops reconnecting); commands in flight fail. */
  close(): Promise<void> {
    try {
      this.#client.destroy();
    } catch { /* never connected */ }
    return Promise.resolve();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
