/**
 * `startFleet(n)`: `n` Deno edges (in process, `startDenoEdge`) on one S3 store (`s3rver`, an S3
 * emulator from npm) coordinated through one `redis-server`, behind a round-robin front (a relay
 * that sends each request to the next edge). Pack URIs name the front, so a clone's pack
 * downloads land on other nodes than the one that handed the URIs out.
 */
import { type RunningEdge, startDenoEdge } from "../../edge/deno/server.ts";
import { edgeConfigFor, type EdgeUnderTestOptions } from "./edge.ts";
import { type S3Emulator, startS3Emulator } from "./s3_emulator.ts";
import { type RedisServer, startRedis } from "./redis_server.ts";
import { type Relay, startRelay } from "./relay.ts";
import { RedisFleetState } from "../../edge/deno/redis_fleet.ts";
import { publishedCounter } from "../../src/proxy/snapshots/fleet_coordinator.ts";
import type { PackStore } from "../../src/storage/store.ts";

export interface Fleet extends AsyncDisposable {
  front: Relay;
  /** Node `i`, or null once it was stopped. */
  nodes: (RunningEdge | null)[];
  s3: S3Emulator;
  redis: RedisServer;
  store: string;
  signingKey: Uint8Array;
  /** Failures of background builds, per node. */
  buildErrors: string[][];
  /** Starts node `i` again (or a new one at the end). */
  startNode(i?: number): Promise<RunningEdge>;
  /** Snapshots published for the repository with this id, fleet-wide (the coordinator's count). */
  published(repoId: string): Promise<number>;
  /** Waits until no node has a build running. */
  idle(): Promise<void>;
}

export interface FleetOptions extends EdgeUnderTestOptions {
  leaseMs?: number;
  storeMaxBytes?: number;
  /** Per node: how far its clock is off (ms; nodes' clocks apart by seconds). */
  clockSkewMs?: number[];
  /** Told of every S3 request any node sends (benches). */
  onStoreRequest?: (command: string) => void;
  /** Per node: wraps its store (a slow or failing store under one node). */
  wrapStore?: (i: number, store: PackStore) => PackStore;
}

export async function startFleet(n: number, opts: FleetOptions): Promise<Fleet> {
  await using stack = new AsyncDisposableStack();
  const s3 = stack.use(await startS3Emulator());
  const redis = stack.use(await startRedis());
  const store = `s3://gitedge/fleet-${crypto.randomUUID().slice(0, 8)}`;
  const signingKey = crypto.getRandomValues(new Uint8Array(32));
  const nodes: (RunningEdge | null)[] = [];
  const buildErrors: string[][] = [];
  let next = 0;
  const front = stack.use(
    await startRelay(() => {
      const live = nodes.filter((e) => e !== null) as RunningEdge[];
      return live[next++ % live.length].url;
    }),
  );
  const startNode = async (i = nodes.length) => {
    buildErrors[i] = [];
    const edge = await startDenoEdge({
      store,
      port: 0,
      s3Client: s3.client,
      onStoreRequest: opts.onStoreRequest,
      wrapStore: opts.wrapStore ? (store) => opts.wrapStore!(i, store) : undefined,
      coordinator: redis.url,
      signingKey,
      fleet: { leaseMs: opts.leaseMs ?? 3000 },
      clock: { now: () => Date.now() + (opts.clockSkewMs?.[i] ?? 0) },
      config: {
        ...edgeConfigFor({ ...opts, publicUrl: front.url }),
        ...(opts.storeMaxBytes ? { storeMaxBytes: opts.storeMaxBytes } : {}),
      },
      onBuildError: (path, err) =>
        buildErrors[i].push(`${path}: ${err instanceof Error ? err.message : String(err)}`),
    });
    nodes[i] = edge;
    return edge;
  };
  for (let i = 0; i < n; i++) stack.defer(async () => await nodes[i]?.stop());
  for (let i = 0; i < n; i++) await startNode(i);
  const counter = new RedisFleetState({ url: redis.url, namespace: store });
  await counter.connect();
  stack.defer(() => counter.close());
  const owned = stack.move();
  return {
    front,
    nodes,
    s3,
    redis,
    store,
    signingKey,
    buildErrors,
    startNode,
    published: (id) => counter.count(publishedCounter(id)),
    idle: async () => {
      await Promise.all(nodes.map((e) => e?.idle()));
    },
    [Symbol.asyncDispose]: () => owned.disposeAsync(),
  };
}
