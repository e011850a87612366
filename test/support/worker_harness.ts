/**
 * Running Workers in workerd from Deno tests: bundle the entry with `deno bundle` (the same
 * resolver and import map as the rest of the project), then start it with Miniflare, which
 * drives the real workerd binary with local R2 and Durable Objects (in memory, per instance).
 *
 * `startWorkerEdge` mirrors `startDenoEdge` (edge/deno/server.ts) so one end-to-end suite can take
 * either runtime: both resolve to `{ url, stop() }`.
 */
import type { Readable } from "node:stream";
import { Log, LogLevel, Miniflare } from "miniflare";
import type { EdgeConfig } from "../../src/proxy/core/config.ts";
import { setting } from "../../src/proxy/settings/resolve.ts";
import { SETTINGS } from "../../src/proxy/settings/table.ts";
import type { R2Bucket } from "../../edge/cloudflare/worker_types.ts";
import { edgeConfigFor, type EdgeFactory } from "./edge.ts";
import { withinDeadline } from "./deadline.ts";

/**
 * Test options for every test that starts workerd. Miniflare's `dispose()` leaves the MessagePort
 * of its synchronous fetcher open and removes its temp dir without awaiting it: leaks inside the
 * dependency, not ours to close, so these tests run without the ops and resources sanitizers.
 */
export const MINIFLARE_LEAKS = { sanitizeOps: false, sanitizeResources: false } as const;

/** `deno bundle` failed. */
export class WorkerBundleError extends Error {
  override name = "WorkerBundleError";
  constructor(entry: string, readonly stderr: string) {
    super(`bundling ${entry} failed: ${stderr.trim()}`);
  }
}

/** Compatibility date the tests run the Worker with (matches wrangler.toml). */
export const COMPATIBILITY_DATE = "2025-09-01";

/** Modules the Workers runtime provides: the bundle imports them (as wrangler's esbuild does). */
const RUNTIME_MODULES = ["cloudflare:workers"];

/** Bundles `entry` (a path relative to the repository root or absolute) into `outFile`. */
export async function bundleWorker(entry: string, outFile: string): Promise<void> {
  const external = RUNTIME_MODULES.flatMap((name) => ["--external", name]);
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform=browser",
      "--format=esm",
      ...external,
      "-o",
      outFile,
      entry,
    ],
    cwd: new URL("../../", import.meta.url).pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new WorkerBundleError(entry, new TextDecoder().decode(out.stderr));
}

export interface StartWorkerOptions {
  /** Entry module, relative to the repository root (e.g. `edge/cloudflare/worker.ts`). */
  entry: string;
  /** Plain-text vars and secrets. */
  bindings?: Record<string, string>;
  /** R2 bucket binding names. */
  r2Buckets?: string[];
  /** Durable Object bindings: binding name to exported class name (SQLite-backed). */
  durableObjects?: Record<string, string>;
  /** Forward the Worker's console output and runtime warnings to stderr. */
  verbose?: boolean;
  /** Open workerd's V8 inspector on this loopback port (benches read the isolate's heap). */
  inspectorPort?: number;
  /** Keep R2 and Durable Object data in this directory, so a new workerd picks up where one stopped. */
  persistDir?: string;
  /**
   * Receives every line the Worker logs (its `console` output, structured by workerd). Errors and
   * warnings still reach stderr; everything does with `verbose`.
   */
  onLog?: (log: { level: string; message: string }) => void;
  /**
   * Receives workerd's raw stdout and stderr instead of Miniflare's handling of them (benches read
   * V8's `--trace-gc` lines); not with `onLog`.
   */
  onRuntimeOutput?: (chunk: Uint8Array) => void;
}

/** A Worker running in workerd. */
export interface RunningWorker extends AsyncDisposable {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  url: string;
  miniflare: Miniflare;
  /** Disposes workerd and the bundle; idempotent. */
  stop(): Promise<void>;
  /**
   * SIGKILLs the workerd process serving `url` (no cleanup runs inside the Worker: a crash or an
   * eviction), then disposes the rest like {@link stop}.
   */
  kill(): Promise<void>;
}

/** Bundles and starts a Worker on 127.0.0.1 with a free port. */
export async function startWorker(opts: StartWorkerOptions): Promise<RunningWorker> {
  const dir = await Deno.makeTempDir({ prefix: "gitedge-worker-" });
  const scriptPath = `${dir}/worker.js`;
  try {
    await bundleWorker(opts.entry, scriptPath);
    const durableObjects = Object.fromEntries(
      Object.entries(opts.durableObjects ?? {}).map(([binding, className]) => [
        binding,
        { className, useSQLite: true },
      ]),
    );
    const miniflare = new Miniflare({
      modules: true,
      scriptPath,
      modulesRoot: dir,
      compatibilityDate: COMPATIBILITY_DATE,
      bindings: opts.bindings ?? {},
      r2Buckets: opts.r2Buckets ?? [],
      durableObjects,
      // No network lookups: use the placeholder `request.cf` instead of fetching a real one.
      cf: false,
      host: "127.0.0.1",
      port: 0,
      log: new Log(opts.verbose ? LogLevel.DEBUG : LogLevel.WARN),
      ...(opts.inspectorPort === undefined ? {} : { inspectorPort: opts.inspectorPort }),
      ...(opts.persistDir === undefined ? {} : {
        r2Persist: `${opts.persistDir}/r2`,
        durableObjectsPersist: `${opts.persistDir}/do`,
      }),
      ...(opts.onLog
        ? {
          handleStructuredLogs: (log: { level: string; message: string }) => {
            opts.onLog!(log);
            if (opts.verbose || log.level === "error" || log.level === "warn") {
              console.error(`workerd ${log.level}: ${log.message}`);
            }
          },
        }
        : {}),
      ...(opts.onRuntimeOutput
        ? {
          handleRuntimeStdio: (stdout: Readable, stderr: Readable) => {
            for (const stream of [stdout, stderr]) {
              stream.on("data", (chunk: Uint8Array) => opts.onRuntimeOutput!(chunk));
            }
          },
        }
        : {}),
    });
    const ready = await miniflare.ready;
    let stopped: Promise<void> | null = null;
    const stop = () =>
      stopped ??= miniflare.dispose().finally(() => Deno.remove(dir, { recursive: true }));
    const kill = async () => {
      const pid = await listeningPid(Number(ready.port));
      if (pid === undefined) throw new Error(`no workerd process listens on ${ready.origin}`);
      Deno.kill(pid, "SIGKILL");
      await stop().catch(
        () => {/* workerd is gone: disposing it may fail, the bundle is removed */},
      );
    };
    return {
      url: ready.origin,
      miniflare,
      stop,
      kill,
      [Symbol.asyncDispose]: stop,
    };
  } catch (error) {
    await Deno.remove(dir, { recursive: true });
    throw error;
  }
}

export interface WorkerEdgeOptions {
  /** Edge configuration, as for `startDenoEdge`; turned into the Worker's vars. */
  config: Partial<EdgeConfig>;
  /** URL-signing key; a random one when absent. */
  signingKey?: Uint8Array;
  /** Extra vars (e.g. `R2_PART_MIB`, `REFRESH_SECONDS`). */
  vars?: Record<string, string>;
  verbose?: boolean;
  inspectorPort?: number;
  persistDir?: string;
  onLog?: StartWorkerOptions["onLog"];
  onRuntimeOutput?: StartWorkerOptions["onRuntimeOutput"];
}

/** The gitedge Worker (`edge/cloudflare/worker.ts`) in workerd, with local R2 and Durable Objects. */
export async function startWorkerEdge(opts: WorkerEdgeOptions): Promise<RunningWorker> {
  return await startWorker({
    entry: "edge/cloudflare/worker.ts",
    bindings: { ...workerVars(opts.config, opts.signingKey), ...opts.vars },
    r2Buckets: ["PACKS"],
    durableObjects: { REPO_SNAPSHOTS: "RepoSnapshotsObject" },
    verbose: opts.verbose,
    inspectorPort: opts.inspectorPort,
    persistDir: opts.persistDir,
    onLog: opts.onLog,
    onRuntimeOutput: opts.onRuntimeOutput,
  });
}

/** The Worker vars and secrets (named by `src/proxy/settings/table.ts`) that express `config`. */
export function workerVars(
  config: Partial<EdgeConfig>,
  signingKey?: Uint8Array,
): Record<string, string> {
  const key = signingKey ?? crypto.getRandomValues(new Uint8Array(32));
  const vars: Record<string, string> = {
    [setting("signingKey").workerVar!]: Array.from(key, (b) => b.toString(16).padStart(2, "0"))
      .join(""),
  };
  for (const s of SETTINGS) {
    const value = s.edge ? config[s.key as keyof EdgeConfig] : undefined;
    if (value === undefined || s.workerVar === undefined) continue;
    vars[s.workerVar] = Array.isArray(value) ? value.join(",") : String(value);
  }
  return vars;
}

/**
 * `EdgeFactory` for the shared end-to-end suite: the Worker in workerd, with the suite's store
 * hooks reaching into Miniflare's local R2 bucket.
 */
export const workerEdgeFactory: EdgeFactory = async (opts) => {
  // Background build failures are logged inside workerd (by the Durable Object, or by the
  // Worker when scheduling fails); the suite reads them from the log.
  const buildErrors: string[] = [];
  const worker = await startWorkerEdge({
    config: edgeConfigFor(opts),
    onLog: ({ message }) => {
      if (/gitedge: background (snapshot build for \S+|work) failed/.test(message)) {
        buildErrors.push(message);
      }
    },
  });
  return {
    runtime: "worker",
    url: worker.url,
    buildErrors,
    settled: (repo, done) => statusSettled(worker.url, repo, done),
    deleteStored: async (key) => await (await packsBucket(worker)).delete(key),
    writeStored: async (key, bytes) => {
      await (await packsBucket(worker)).put(key, bytes);
    },
    listStored: (prefix) => listBucket(worker, prefix),
    readStored: async (key) => {
      const object = await (await packsBucket(worker)).get(key);
      if (!object) throw new Error(`no stored object ${key}`);
      return new Uint8Array(await new Response(object.body).arrayBuffer());
    },
    stop: worker.stop,
    [Symbol.asyncDispose]: worker.stop,
  };
};

/**
 * Waits until `/_edge/status/<repo>` shows no build running and `done(status)` holds. The
 * Durable Object's builds cannot be watched from outside workerd, so this polls, backing off from
 * 10 ms to 200 ms; a liveness deadline turns "never" into a failure.
 */
async function statusSettled(
  url: string,
  repo: string,
  done: (status: Record<string, unknown>) => boolean,
): Promise<void> {
  const poll = async () => {
    for (let wait = 10;; wait = Math.min(wait * 2, 200)) {
      const res = await fetch(`${url}/_edge/status/${repo}`);
      const { snapshot } = await res.json();
      if (snapshot.state !== "building" && done(snapshot)) return;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  };
  await withinDeadline(poll(), `status of ${repo} to settle`);
}

/** Keys under `prefix` in the Worker's local `PACKS` bucket, sorted. */
export async function listBucket(worker: RunningWorker, prefix: string): Promise<string[]> {
  const bucket = await packsBucket(worker);
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix, cursor });
    keys.push(...page.objects.map((o) => o.key));
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return keys.sort();
}

/**
 * The Worker's local `PACKS` bucket, reached from Deno through Miniflare's binding proxy.
 * Miniflare types it with `@cloudflare/workers-types`, which this project does not load; the
 * proxy implements the R2 API that `edge/cloudflare/worker_types.ts` declares.
 */
export async function packsBucket(worker: RunningWorker): Promise<R2Bucket> {
  return await worker.miniflare.getR2Bucket("PACKS") as unknown as R2Bucket;
}

/** The workerd process listening on TCP `port` (from /proc: the socket's inode among its fds). */
async function listeningPid(port: number): Promise<number | undefined> {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const text = await Deno.readTextFile(table).catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local address `HEXIP:HEXPORT`, state 0A = LISTEN, inode in column 10
      if (fields.length > 9 && fields[3] === "0A" && fields[1].endsWith(`:${hex4(port)}`)) {
        inodes.add(`socket:[${fields[9]}]`);
      }
    }
  }
  for await (const proc of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(proc.name)) continue;
    const comm = await Deno.readTextFile(`/proc/${proc.name}/comm`).catch(() => "");
    if (comm.trim() !== "workerd") continue;
    try {
      for await (const fd of Deno.readDir(`/proc/${proc.name}/fd`)) {
        const target = await Deno.readLink(`/proc/${proc.name}/fd/${fd.name}`).catch(() => "");
        if (inodes.has(target)) return Number(proc.name);
      }
    } catch {
      // the process exited meanwhile
    }
  }
  return undefined;
}

function hex4(port: number): string {
  return port.toString(16).toUpperCase().padStart(4, "0");
}
