/**
 * Every setting of the edge ({@link SETTINGS}): its name, `gitedge serve` flag and environment
 * variable, Worker var, default, minimum and help. `gitedge serve`'s flags and `--help`, the
 * Worker's env parsing and the settings reference in the docs all come from here.
 */
import { DEFAULT_EDGE_CONFIG, type EdgeConfig } from "../core/config.ts";
import type { LogFormat, LogLevel } from "../core/log.ts";
import {
  parseHttpUrl,
  parseIntAtLeast,
  parseOneOf,
  parseOnOff,
  parseRedisUrl,
  parseScheme,
  parseSigningKeyHex,
} from "./parsers.ts";

/** Where settings come from: `gitedge serve` (flags, environment), Worker vars, or code. */
export type SettingsSource = "serve" | "worker" | "config";

/** `gitedge serve`'s connection cap and deadlines unless set (Workers have the platform's). */
export const DEFAULT_CONNECTION_LIMITS = {
  maxConnections: 1024,
  headerTimeoutSeconds: 30,
  idleTimeoutSeconds: 60,
} as const;

/** The settings of `gitedge serve` that are not the edge app's: the server's own. */
export interface ServeExtras {
  port: number;
  host: string;
  store: string;
  /** `redis://…`: the fleet's coordinator (edges on one store act as one). */
  coordinator?: string;
  /** Term of the fleet's leases (s): a node killed mid-build is replaced after this long. */
  leaseSeconds?: number;
  /** Path-style requests to an `s3://` store. */
  s3PathStyle?: boolean;
  maxConnections: number;
  headerTimeoutSeconds: number;
  idleTimeoutSeconds: number;
  /** URL-signing key; `gitedge serve` keeps one in `<store>/signing.key` when unset. */
  signingKey?: Uint8Array;
  /** On SIGTERM/SIGINT, how long responses in flight may take to finish. */
  drainTimeoutSeconds: number;
  logLevel: LogLevel;
  /** Unset: JSON unless stdout is a terminal. */
  logFormat?: LogFormat;
  /** A git mirror per repository answers fetches the snapshot does not take (docs/mirror.md). */
  mirror: boolean;
  /** Directory of the mirrors; `<store>/mirrors` when unset. */
  mirrorDir?: string;
  /** Most bytes all mirrors take on disk; 0: no cap of their own. */
  mirrorMaxBytes: number;
}

/** The settings of the Worker that are not the edge app's. */
export interface WorkerExtras {
  signingKey: Uint8Array;
  r2PartMiB: number;
  refreshSeconds?: number;
  logLevel: LogLevel;
}

/** Every setting's value by its name. */
type Values = EdgeConfig & ServeExtras & WorkerExtras;

/** A setting's name: its key in {@link EdgeConfig} or in a runtime's extras. */
export type SettingKey = keyof Values;

/** One setting: how each settings source spells it, its default and bounds, and what it means. */
export interface Setting {
  key: SettingKey;
  /** Whether it belongs to {@link EdgeConfig} (the app's), else to a runtime's extras. */
  edge: boolean;
  /** `gitedge serve` flag, and the placeholder of its value in `--help`. */
  flag?: `--${string}`;
  arg?: string;
  /**
   * Environment variable `gitedge serve` reads it from (a flag overrides it). Every setting with a
   * flag has one: `GITEDGE_` and its key in capitals (`urlTtlSeconds`: `GITEDGE_URL_TTL_SECONDS`),
   * filled in below the table unless given.
   */
  env?: `GITEDGE_${string}`;
  /** Worker var or secret. */
  workerVar?: string;
  /** A list: the flag repeats, the Worker var separates items by commas. */
  list?: true;
  /** Never quoted in messages. */
  secret?: true;
  /** The settings source where leaving it unset is an error, and a hint how to set it. */
  required?: { from: SettingsSource; hint: string };
  /** Integer settings: the smallest value accepted. */
  min?: number;
  /** An integer count of bytes (documented as MiB/GiB). */
  bytes?: true;
  /** Value when not given (per item for lists); absent: unset. */
  default?: unknown;
  /** The default as documented, where it is not simply the value. */
  defaultText?: string;
  /** One sentence or two, `code` in backticks (printed without them by `--help`). */
  help: string;
  /** Text to value; throws {@link ConfigValueError}. Integer settings parse against `min`. */
  parse: (text: string) => unknown;
}

const MiB = 1024 * 1024;

/** The R2 multipart part size (and a Worker build's segment size) unless `R2_PART_MIB` says. */
export const DEFAULT_R2_PART_MIB = 8;

function integer(s: Omit<Setting, "parse"> & { min: number }): Setting {
  return { ...s, parse: (text) => parseIntAtLeast(text, s.min) };
}

function text(s: Omit<Setting, "parse">): Setting {
  return { ...s, parse: (value) => value };
}

/**
 * Every setting of the edge, in the order `--help` and docs/settings.md list them. To add one: an
 * entry here, its key in `EdgeConfig` (the app's) or in `ServeExtras`/`WorkerExtras` (a
 * runtime's), where the runtime takes it from the resolved settings, then `deno task settings`.
 */
export const SETTINGS: readonly Setting[] = withEnvNames([
  {
    key: "origin",
    edge: true,
    flag: "--origin",
    arg: "URL",
    workerVar: "ORIGIN",
    help: "Single-origin mode: `/x/y.git` is served from `URL/x/y.git`.",
    parse: parseHttpUrl,
  },
  {
    key: "allowHosts",
    edge: true,
    flag: "--allow-host",
    arg: "HOST",
    workerVar: "ALLOW_HOSTS",
    list: true,
    help: "Multi-origin mode: `/HOST/x/y.git` is served from `https://HOST/x/y.git`, " +
      "for the hosts listed only (never an open proxy).",
    parse: (host) => host.toLowerCase(),
  },
  integer({
    key: "port",
    edge: false,
    flag: "--port",
    arg: "N",
    min: 0,
    default: 8080,
    help: "Port to listen on (0 picks a free one and prints it).",
  }),
  text({
    key: "host",
    edge: false,
    flag: "--host",
    arg: "ADDR",
    default: "127.0.0.1",
    help: "Address to bind.",
  }),
  text({
    key: "store",
    edge: false,
    flag: "--store",
    arg: "STORE",
    default: ".gitedge-store",
    help:
      "Pack store: a directory, or `s3://BUCKET/PREFIX`: an S3 bucket and key prefix (AWS S3, R2's S3 API, MinIO, " +
      "Ceph RGW); endpoint, region and credentials from the standard AWS environment and config " +
      "(`AWS_ENDPOINT_URL_S3`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_PROFILE`, …). An S3 store " +
      "needs `GITEDGE_SIGNING_KEY`.",
  }),
  {
    key: "s3PathStyle",
    edge: false,
    flag: "--s3-path-style",
    arg: "on/off",
    defaultText: "off",
    help: "Path-style requests to an `s3://` store (`ENDPOINT/BUCKET/KEY`: MinIO, Ceph RGW).",
    parse: parseOnOff,
  },
  {
    key: "coordinator",
    edge: false,
    flag: "--coordinator",
    arg: "URL",
    secret: true,
    defaultText: "unset (this process alone)",
    help: "`redis://[USER:PASSWORD@]HOST:PORT` (Redis or Valkey; `rediss://` for TLS): edges on " +
      "one store build each snapshot once for all, under leases kept there.",
    parse: parseRedisUrl,
  },
  integer({
    key: "leaseSeconds",
    edge: false,
    flag: "--lease-seconds",
    arg: "N",
    min: 1,
    defaultText: "30",
    help: "With `--coordinator`: term of a build lease, renewed every third of it; a node killed " +
      "mid-build is replaced by another after this long (kept on the coordinator's clock).",
  }),
  {
    key: "multiOriginScheme",
    edge: true,
    workerVar: "MULTI_ORIGIN_SCHEME",
    defaultText: "https",
    help: "Scheme of origin requests in multi-origin mode: `https`, or `http` for local tests.",
    parse: parseScheme,
  },
  {
    key: "publicUrl",
    edge: true,
    flag: "--public-url",
    arg: "URL",
    workerVar: "PUBLIC_URL",
    defaultText: "derived from each request",
    help: "Base URL of pack URIs: the edge's public URL.",
    parse: parseHttpUrl,
  },
  {
    key: "lfsOrigin",
    edge: true,
    flag: "--lfs-origin",
    arg: "URL",
    workerVar: "LFS_ORIGIN",
    defaultText: "`<repo URL>/info/lfs`",
    help:
      "Base URL of the origin's Git LFS server when it is not the Git origin (single-origin mode): `/x.git/info/lfs` goes to `URL/x.git/info/lfs`.",
    parse: parseHttpUrl,
  },
  integer({
    key: "chunks",
    edge: true,
    flag: "--chunks",
    arg: "N",
    workerVar: "CHUNKS",
    min: 1,
    default: DEFAULT_EDGE_CONFIG.chunks,
    help: "Most packs per snapshot layer (clients download them in parallel).",
  }),
  integer({
    key: "urlTtlSeconds",
    edge: true,
    flag: "--url-ttl",
    arg: "SECONDS",
    workerVar: "URL_TTL_SECONDS",
    min: 60,
    default: DEFAULT_EDGE_CONFIG.urlTtlSeconds,
    help: "Lifetime of a signed pack URL.",
  }),
  integer({
    key: "maxRequestBytes",
    edge: true,
    flag: "--max-request-bytes",
    arg: "N",
    workerVar: "MAX_REQUEST_BYTES",
    min: 1024,
    bytes: true,
    default: DEFAULT_EDGE_CONFIG.maxRequestBytes,
    help: "Largest protocol-v2 request the edge parses (16 MiB: a clone of 335,000 refs; " +
      "then 413). Pushes and v0/v1 requests stream through. Parsed requests together hold " +
      "at most 1.5 times this (then 503).",
  }),
  integer({
    key: "bodyTimeoutSeconds",
    edge: true,
    flag: "--body-timeout",
    arg: "SECONDS",
    workerVar: "BODY_TIMEOUT_SECONDS",
    min: 1,
    default: DEFAULT_EDGE_CONFIG.bodyTimeoutSeconds,
    help: "A request body the edge parses must arrive whole within this (else 408).",
  }),
  integer({
    key: "maxConnections",
    edge: false,
    flag: "--max-connections",
    arg: "N",
    min: 1,
    default: DEFAULT_CONNECTION_LIMITS.maxConnections,
    help: "Client connections open at once; beyond it a connection is answered 503 and closed. " +
      "Each holds 3 file descriptors: keep 3 N plus a few hundred under `ulimit -n`.",
  }),
  integer({
    key: "headerTimeoutSeconds",
    edge: false,
    flag: "--header-timeout",
    arg: "SECONDS",
    min: 1,
    default: DEFAULT_CONNECTION_LIMITS.headerTimeoutSeconds,
    help: "A request's headers must arrive within this, from the connection's start or a " +
      "later request's first byte (else the connection is closed).",
  }),
  integer({
    key: "idleTimeoutSeconds",
    edge: false,
    flag: "--idle-timeout",
    arg: "SECONDS",
    min: 1,
    default: DEFAULT_CONNECTION_LIMITS.idleTimeoutSeconds,
    help: "A kept-alive connection with no request under way is closed after this, and so is " +
      "one whose client takes no response bytes for this long; a slow download that " +
      "progresses is never cut.",
  }),
  integer({
    key: "drainTimeoutSeconds",
    edge: false,
    flag: "--drain-timeout",
    arg: "SECONDS",
    min: 0,
    default: 30,
    help: "On SIGTERM or SIGINT the server stops accepting connections and lets responses in " +
      "flight finish for up to this long, then cuts the rest and exits 0 (a second signal " +
      "exits at once).",
  }),
  {
    key: "logLevel",
    edge: false,
    flag: "--log-level",
    arg: "LEVEL",
    workerVar: "LOG_LEVEL",
    default: "info",
    help: "Least level logged: `debug`, `info` (a line per request, build steps, settings at " +
      "start), `warn` (origin errors, cut responses) or `error`.",
    parse: parseOneOf(["debug", "info", "warn", "error"] as const),
  },
  {
    key: "logFormat",
    edge: false,
    flag: "--log-format",
    arg: "FORMAT",
    defaultText: "json, or text on a terminal",
    help: "`json` (a JSON object per line) or `text` (a readable line). Workers always log JSON.",
    parse: parseOneOf(["json", "text"] as const),
  },
  integer({
    key: "buildBackoffSeconds",
    edge: true,
    flag: "--build-backoff",
    arg: "SECONDS",
    workerVar: "BUILD_BACKOFF_SECONDS",
    min: 0,
    default: DEFAULT_EDGE_CONFIG.buildBackoffSeconds,
    help: "After a failed snapshot build, clones start no build for this long, doubling per " +
      "failure in a row up to 64 times (0: off; `/_edge/warm` always builds).",
  }),
  integer({
    key: "authTtlSeconds",
    edge: true,
    flag: "--auth-ttl",
    arg: "SECONDS",
    workerVar: "AUTH_TTL_SECONDS",
    min: 0,
    default: DEFAULT_EDGE_CONFIG.authTtlSeconds,
    help: "How long the origin's acceptance of a credential lets the edge answer fetches " +
      "from its snapshot alone (0: always ask the origin).",
  }),
  integer({
    key: "lsRefsAheadSeconds",
    edge: true,
    flag: "--ls-refs-ahead",
    arg: "SECONDS",
    workerVar: "LS_REFS_AHEAD_SECONDS",
    min: 0,
    default: DEFAULT_EDGE_CONFIG.lsRefsAheadSeconds,
    help: "With a v2 `info/refs`, the edge sends the origin the `ls-refs` that credential last " +
      "sent there (answered 200); its `ls-refs` within this many seconds gets that answer " +
      "(computed after its clone began), and its cached fetch that listing's tag digest (0: off).",
  }),
  integer({
    key: "responseCacheBytes",
    edge: true,
    flag: "--response-cache-bytes",
    arg: "N",
    workerVar: "RESPONSE_CACHE_BYTES",
    min: 0,
    bytes: true,
    default: DEFAULT_EDGE_CONFIG.responseCacheBytes,
    help: "Size of the cache of answers to fetches (shallow, partial and single-commit " +
      "clones, incremental fetches keyed by their haves) in the store (0: off).",
  }),
  {
    key: "snapshotPlainClones",
    edge: true,
    flag: "--snapshot-plain-clones",
    arg: "on/off",
    workerVar: "SNAPSHOT_PLAIN_CLONES",
    default: DEFAULT_EDGE_CONFIG.snapshotPlainClones,
    help: "A plain clone (no packfile URIs) whose wants are exactly a one-layer snapshot's tips " +
      "gets one pack streamed from the snapshot's packs, for a credential the origin accepted " +
      "within `--auth-ttl` (off: the response cache or the origin answers it).",
    parse: parseOnOff,
  },
  integer({
    key: "storeMaxBytes",
    edge: true,
    flag: "--store-max-bytes",
    arg: "N",
    workerVar: "STORE_MAX_BYTES",
    min: 0,
    bytes: true,
    defaultText: "0 (no cap)",
    help: "Most bytes of snapshots the store keeps; beyond, the least recently cloned " +
      "repositories' snapshots are evicted (never packs whose URLs may be in use: those of " +
      "clones within `--url-ttl`), and their next clone passes through and rebuilds (0: no cap).",
  }),
  {
    key: "packIndexes",
    edge: true,
    flag: "--pack-indexes",
    arg: "on/off",
    env: "GITEDGE_PACK_INDEXES",
    defaultText: "off",
    help: "Keep each snapshot pack's `.idx` (built with `git index-pack`, which must be " +
      "installed) and serve it to clients that ask (`gitedge clone --trust-edge-index`): they " +
      "then check checksums instead of indexing. Only for fleets that trust their own edge. " +
      "Not on Workers.",
    parse: parseOnOff,
  },
  {
    key: "mirror",
    edge: false,
    flag: "--mirror",
    arg: "on/off",
    default: true,
    defaultText: "on (where `git` runs)",
    help: "Keep a git mirror of each repository, seeded from its snapshot and kept current by " +
      "incremental fetches from the origin, and answer from it (git's `upload-pack`) the fetches " +
      "the snapshot does not take: shallow, partial, incremental, by id. Only for credentials " +
      "the origin accepted within `--auth-ttl`. Not on Workers.",
    parse: parseOnOff,
  },
  text({
    key: "mirrorDir",
    edge: false,
    flag: "--mirror-dir",
    arg: "DIR",
    defaultText: "`DIR/mirrors` of `--store`",
    help: "Directory of the git mirrors (one bare repository per repository).",
  }),
  integer({
    key: "mirrorMaxBytes",
    edge: false,
    flag: "--mirror-max-bytes",
    arg: "N",
    min: 0,
    bytes: true,
    default: 0,
    defaultText: "0 (no cap of their own)",
    help: "Most bytes the git mirrors take on disk; beyond, the least recently used are " +
      "discarded (and seeded again from their snapshot when next needed). A mirror also goes " +
      "when its repository's snapshot is evicted (`--store-max-bytes`).",
  }),
  text({
    key: "adminToken",
    edge: true,
    flag: "--admin-token",
    arg: "TOKEN",
    env: "GITEDGE_ADMIN_TOKEN",
    workerVar: "ADMIN_TOKEN",
    secret: true,
    help: "Require `Authorization: Bearer TOKEN` on `/_edge/warm`, `/_edge/status` and the " +
      "operator's page (`/_edge/`, `/_edge/repos`); the read-only ones also take Basic with the " +
      "token as password (a browser's login prompt).",
  }),
  {
    key: "signingKey",
    edge: false,
    env: "GITEDGE_SIGNING_KEY",
    workerVar: "EDGE_SIGNING_KEY",
    secret: true,
    required: {
      from: "worker",
      hint: "openssl rand -hex 32 | wrangler secret put EDGE_SIGNING_KEY; for wrangler dev, " +
        "EDGE_SIGNING_KEY=<hex> in .dev.vars",
    },
    help: "Key that signs pack URLs, hex, at least 32 digits. Required on Workers (a secret); " +
      "`gitedge serve` keeps one in `DIR/signing.key` (created on first start) when unset.",
    parse: parseSigningKeyHex,
  },
  integer({
    key: "r2PartMiB",
    edge: false,
    workerVar: "R2_PART_MIB",
    min: 5,
    default: DEFAULT_R2_PART_MIB,
    help: "R2 multipart part size in MiB, and the size of a build's segments.",
  }),
  integer({
    key: "refreshSeconds",
    edge: false,
    workerVar: "REFRESH_SECONDS",
    min: 60,
    defaultText: "unset (off)",
    help: "Refresh period of snapshots that need no credentials (Durable Object alarms).",
  }),
]);

/** `GITEDGE_` and `key` in capitals with underscores: `urlTtlSeconds` is `GITEDGE_URL_TTL_SECONDS`. */
export function envNameOf(key: SettingKey): `GITEDGE_${string}` {
  return `GITEDGE_${key.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()}`;
}

/**
 * Containers and service units configure by environment: whatever `gitedge serve` takes as a flag
 * it also reads from `GITEDGE_<NAME>` (the flag wins).
 */
function withEnvNames(settings: Setting[]): Setting[] {
  return settings.map((s) =>
    s.flag !== undefined && s.env === undefined ? { ...s, env: envNameOf(s.key) } : s
  );
}

/** Bytes as documented: `16 MiB`, `1 GiB`, else the number. */
export function formatBytes(n: number): string {
  if (n >= 1024 * MiB && n % (1024 * MiB) === 0) return `${n / (1024 * MiB)} GiB`;
  if (n >= MiB && n % MiB === 0) return `${n / MiB} MiB`;
  return String(n);
}

/** Whether settings from `from` take `setting` at all. */
export function appliesTo(setting: Setting, from: SettingsSource): boolean {
  if (from === "serve") return setting.flag !== undefined || setting.env !== undefined;
  if (from === "worker") return setting.workerVar !== undefined;
  return setting.edge;
}
