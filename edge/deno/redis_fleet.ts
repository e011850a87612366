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
import {
  type Counts,
  MAX_REPOS,
  type RepoRecord,
  type SharedRegistry,
} from "../../src/proxy/ops/repo_registry.ts";

const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1]) else return 0 end`;

/**
 * The registry's merge of one record (repo_registry.ts `merged`, on the server, atomic): counts
 * added (HINCRBY), last clone and pin at their latest, first sight at its earliest, the newest
 * snapshot with its packs and bytes, a newer eviction counted. KEYS: the record (a hash), the set
 * of ids, the pin, and the batch's mark (its counts are added once: a retry adds nothing). Creates
 * the record unless MAX_REPOS are held (then nil).
 */
const MERGE = `local k = KEYS[1]
local created = 0
local fresh = #KEYS < 4 or redis.call('set', KEYS[4], '1', 'NX', 'PX', 600000) ~= false
if redis.call('exists', k) == 0 then
  if redis.call('scard', KEYS[2]) >= tonumber(ARGV[16]) then return false end
  redis.call('hset', k, 'id', ARGV[1], 'path', ARGV[2], 'originUrl', ARGV[3], 'firstSeenAt', ARGV[4])
  redis.call('sadd', KEYS[2], ARGV[1])
  created = 1
end
local function num(f)
  local v = redis.call('hget', k, f)
  if not v or v == '' then return nil end
  return tonumber(v)
end
local names = {'fetches', 'fromSnapshot', 'answered', 'cached', 'packBytes'}
for i = 1, 5 do
  if fresh and ARGV[6 + i] ~= '0' then redis.call('hincrby', k, names[i], ARGV[6 + i]) end
end
if ARGV[5] ~= '' and (num('lastClonedAt') or -1) < tonumber(ARGV[5]) then
  redis.call('hset', k, 'lastClonedAt', ARGV[5])
end
if tonumber(redis.call('get', KEYS[3]) or '0') < tonumber(ARGV[6]) then
  redis.call('set', KEYS[3], ARGV[6])
end
if tonumber(ARGV[4]) < (num('firstSeenAt') or math.huge) then
  redis.call('hset', k, 'firstSeenAt', ARGV[4])
end
if ARGV[12] ~= '' and (num('builtAt') or -1) <= tonumber(ARGV[12]) then
  redis.call('hset', k, 'builtAt', ARGV[12], 'packs', ARGV[13], 'snapshotBytes', ARGV[14])
end
if ARGV[15] ~= '' and (num('evictedAt') or 0) < tonumber(ARGV[15]) then
  redis.call('hset', k, 'evictedAt', ARGV[15])
  redis.call('hincrby', k, 'evictions', 1)
end
local out = redis.call('hgetall', k)
table.insert(out, 'pinnedUntil')
table.insert(out, redis.call('get', KEYS[3]) or '0')
table.insert(out, '_created')
table.insert(out, tostring(created))
return out`;

/**
 * A pin, refused while the repository is being evicted or when an eviction began since the
 * fetch's epoch (ARGV[2], '' unknown). KEYS: the pin, the eviction mark, the eviction epoch.
 */
const PIN = `if redis.call('exists', KEYS[2]) == 1 then return 0 end
if ARGV[2] ~= '' and tonumber(redis.call('get', KEYS[3]) or '0') ~= tonumber(ARGV[2]) then
  return 0
end
if tonumber(redis.call('get', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('set', KEYS[1], ARGV[1])
end
return 1`;

/** An eviction's mark, refused while a pin holds past ARGV[1]. KEYS as for PIN. */
const BEGIN_EVICTION = `if tonumber(redis.call('get', KEYS[1]) or '0') > tonumber(ARGV[1]) then
  return 0
end
redis.call('set', KEYS[2], '1', 'PX', ARGV[2])
redis.call('incr', KEYS[3])
return 1`;

const COUNT_FIELDS = ["fetches", "fromSnapshot", "answered", "cached", "packBytes"] as const;

/** A record from the fields of its hash (and its pin). */
function recordOf(fields: Record<string, string>, pin: string | null): RepoRecord {
  const n = (f: string) => Number(fields[f] ?? 0) || 0;
  const orNull = (f: string) => fields[f] === undefined || fields[f] === "" ? null : n(f);
  return {
    id: fields.id,
    path: fields.path,
    originUrl: fields.originUrl,
    firstSeenAt: n("firstSeenAt"),
    lastClonedAt: orNull("lastClonedAt"),
    pinnedUntil: Number(pin ?? fields.pinnedUntil ?? 0) || 0,
    fetches: n("fetches"),
    fromSnapshot: n("fromSnapshot"),
    answered: n("answered"),
    cached: n("cached"),
    packBytes: n("packBytes"),
    builtAt: orNull("builtAt"),
    packs: n("packs"),
    snapshotBytes: n("snapshotBytes"),
    evictedAt: orNull("evictedAt"),
    evictions: n("evictions"),
  };
}

const int = (v: number | null) => v === null ? "" : String(Math.round(v));

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

export class RedisFleetState implements FleetState, SharedRegistry, AsyncDisposable {
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

  // The registry (SharedRegistry): one hash per repository, a set of their ids, a pin, an
  // eviction mark and an eviction count per repository.
  #repoKeys(id: string): { record: string; pin: string; evicting: string; epoch: string } {
    return {
      record: `${this.#ns}repo:${id}`,
      pin: `${this.#ns}pin:${id}`,
      evicting: `${this.#ns}evicting:${id}`,
      epoch: `${this.#ns}evictions:${id}`,
    };
  }

  async merge(
    record: RepoRecord,
    delta: Counts,
    batch?: string,
  ): Promise<{ record: RepoRecord; created: boolean } | null> {
    const keys = this.#repoKeys(record.id);
    const batchKey = batch === undefined ? [] : [`${this.#ns}batch:${batch}`];
    const answer = await this.#run(() =>
      this.#client.eval(MERGE, {
        keys: [keys.record, `${this.#ns}repos`, keys.pin, ...batchKey],
        arguments: [
          record.id,
          record.path,
          record.originUrl,
          int(record.firstSeenAt),
          int(record.lastClonedAt),
          int(record.pinnedUntil),
          ...COUNT_FIELDS.map((k) => int(delta[k])),
          int(record.builtAt),
          int(record.packs),
          int(record.snapshotBytes),
          int(record.evictedAt),
          String(MAX_REPOS),
        ],
      })
    ) as unknown as string[] | null;
    if (!answer) return null;
    const fields: Record<string, string> = {};
    for (let i = 0; i + 1 < answer.length; i += 2) {
      fields[String(answer[i])] = String(answer[i + 1]);
    }
    return { record: recordOf(fields, null), created: fields._created === "1" };
  }

  async list(): Promise<RepoRecord[]> {
    const ids = (await this.#run(() => this.#client.sMembers(`${this.#ns}repos`)))
      .slice(0, MAX_REPOS).map(String);
    // Sent together: the client pipelines the commands of one tick.
    const records = await this.#run(() =>
      Promise.all(ids.map(async (id) => {
        const keys = this.#repoKeys(id);
        const [fields, pin] = await Promise.all([
          this.#client.hGetAll(keys.record),
          this.#client.get(keys.pin),
        ]);
        return fields && fields.id ? recordOf(fields as Record<string, string>, pin) : null;
      }))
    );
    return records.filter((r): r is RepoRecord => r !== null);
  }

  async epoch(id: string): Promise<number> {
    const value = await this.#run(() => this.#client.get(this.#repoKeys(id).epoch));
    return value === null ? 0 : Number(value);
  }

  async pin(id: string, untilMs: number, epoch: number | null): Promise<boolean> {
    const keys = this.#repoKeys(id);
    const answer = await this.#run(() =>
      this.#client.eval(PIN, {
        keys: [keys.pin, keys.evicting, keys.epoch],
        arguments: [int(untilMs), epoch === null ? "" : String(epoch)],
      })
    );
    return Number(answer) === 1;
  }

  async beginEviction(id: string, nowMs: number, ttlMs: number): Promise<boolean> {
    const keys = this.#repoKeys(id);
    const answer = await this.#run(() =>
      this.#client.eval(BEGIN_EVICTION, {
        keys: [keys.pin, keys.evicting, keys.epoch],
        arguments: [int(nowMs), int(ttlMs)],
      })
    );
    return Number(answer) === 1;
  }

  async endEviction(id: string): Promise<void> {
    await this.#run(() => this.#client.del(this.#repoKeys(id).evicting));
  }

  /** Sets flag `name` (for `ttlMs`: it lapses unless set again) or clears it. */
  async setFlag(name: string, on: boolean, ttlMs: number): Promise<void> {
    if (on) {
      await this.#run(() =>
        this.#client.set(this.#ns + name, "1", { expiration: { type: "PX", value: ttlMs } })
      );
    } else {
      await this.#run(() => this.#client.del(this.#ns + name));
    }
  }

  /** Whether flag `name` is set. */
  async flag(name: string): Promise<boolean> {
    return Number(await this.#run(() => this.#client.exists(this.#ns + name))) === 1;
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
