/**
 * The Worker's bindings (`Env`) and how they become the edge's configuration. Vars come from
 * `wrangler.toml` `[vars]`, secrets from `wrangler secret put`; both arrive as strings.
 */
import { DEFAULT_EDGE_CONFIG, type EdgeConfig } from "../../src/proxy/deps.ts";
import {
  ConfigValueError,
  parseHttpUrl,
  parseIntAtLeast,
  parseSigningKeyHex,
  redactCredentials,
} from "../../src/proxy/settings.ts";
import type { DurableObjectNamespace, R2Bucket } from "./worker_types.ts";

/** Everything the Worker and its Durable Object are bound to. */
export interface Env {
  /** R2 bucket holding snapshot packs (and the builder's manifest copies). */
  PACKS: R2Bucket;
  /** One `RepoCoordinator` Durable Object per repository. */
  REPO_COORDINATOR: DurableObjectNamespace;
  /** Secret: HMAC key for pack URLs, hex, at least 32 digits. */
  EDGE_SIGNING_KEY: string;
  /** Single-origin mode: origin base URL. Exclusive with `ALLOW_HOSTS`. */
  ORIGIN?: string;
  /** Multi-origin mode: comma-separated hosts reachable as `/<host>/<path>`. */
  ALLOW_HOSTS?: string;
  /** Scheme for multi-origin mode: `https` (default) or `http` (local tests only). */
  MULTI_ORIGIN_SCHEME?: string;
  /** Base URL for pack URIs (e.g. the route's public https URL); derived per request if unset. */
  PUBLIC_URL?: string;
  /** Max packs per snapshot layer (default 4). */
  CHUNKS?: string;
  /** Lifetime of signed pack URLs in seconds (default 3600). */
  URL_TTL_SECONDS?: string;
  /** Largest protocol-v2 request the edge parses, in bytes (default 16 MiB). */
  MAX_REQUEST_BYTES?: string;
  /** A request body the edge parses must arrive whole within this many seconds (default 60). */
  BODY_TIMEOUT_SECONDS?: string;
  /** After a failed build, clones start none for this long, doubling per failure (default 60). */
  BUILD_BACKOFF_SECONDS?: string;
  /** Seconds the origin's acceptance of a credential lets the edge answer fetches alone (default 30; 0 off). */
  AUTH_TTL_SECONDS?: string;
  /** Size of the response cache (answers to fetches without `have`) in R2, bytes (default 1 GiB; 0 off). */
  RESPONSE_CACHE_BYTES?: string;
  /** Secret: when set, `/_edge/warm` requires `Authorization: Bearer <token>`. */
  ADMIN_TOKEN?: string;
  /** R2 multipart part size in MiB (default 8, at least 5). */
  R2_PART_MIB?: string;
  /** When set, a repository whose snapshot needs no credentials is refreshed this often. */
  REFRESH_SECONDS?: string;
}

/** A binding is missing or malformed; the message names it. */
export class WorkerConfigError extends Error {
  override name = "WorkerConfigError";
}

const DEFAULTS = { ...DEFAULT_EDGE_CONFIG, partMiB: 8 };

/** Builds the edge configuration from the Worker's vars and secrets. */
export function edgeConfigFromEnv(env: Env): EdgeConfig {
  const origin = optional(env.ORIGIN);
  const allowHosts = optional(env.ALLOW_HOSTS)?.split(",").map((h) => h.trim().toLowerCase())
    .filter((h) => h !== "");
  if (origin === undefined && !allowHosts?.length) {
    throw new WorkerConfigError("set the ORIGIN var (single origin) or ALLOW_HOSTS (multi-origin)");
  }
  if (origin !== undefined && allowHosts?.length) {
    throw new WorkerConfigError("ORIGIN and ALLOW_HOSTS are exclusive: set only one");
  }
  const config: EdgeConfig = {
    chunks: integer(env, "CHUNKS", 1) ?? DEFAULTS.chunks,
    urlTtlSeconds: integer(env, "URL_TTL_SECONDS", 60) ?? DEFAULTS.urlTtlSeconds,
    maxRequestBytes: integer(env, "MAX_REQUEST_BYTES", 1024) ?? DEFAULTS.maxRequestBytes,
    authTtlSeconds: integer(env, "AUTH_TTL_SECONDS", 0) ?? DEFAULTS.authTtlSeconds,
    bodyTimeoutSeconds: integer(env, "BODY_TIMEOUT_SECONDS", 1) ?? DEFAULTS.bodyTimeoutSeconds,
    buildBackoffSeconds: integer(env, "BUILD_BACKOFF_SECONDS", 0) ?? DEFAULTS.buildBackoffSeconds,
    responseCacheBytes: integer(env, "RESPONSE_CACHE_BYTES", 0) ?? DEFAULTS.responseCacheBytes,
  };
  if (origin !== undefined) config.origin = httpUrl("ORIGIN", origin);
  if (allowHosts?.length) config.allowHosts = allowHosts;
  const scheme = optional(env.MULTI_ORIGIN_SCHEME);
  if (scheme !== undefined) {
    if (scheme !== "https" && scheme !== "http") {
      throw new WorkerConfigError(`MULTI_ORIGIN_SCHEME must be https or http, got '${scheme}'`);
    }
    config.multiOriginScheme = scheme;
  }
  const publicUrl = optional(env.PUBLIC_URL);
  if (publicUrl !== undefined) config.publicUrl = httpUrl("PUBLIC_URL", publicUrl);
  const adminToken = optional(env.ADMIN_TOKEN);
  if (adminToken !== undefined) config.adminToken = adminToken;
  return config;
}

/** Decodes the `EDGE_SIGNING_KEY` secret (hex, at least 16 bytes). */
export function signingKeyFromEnv(env: Env): Uint8Array {
  const hex = optional(env.EDGE_SIGNING_KEY);
  if (hex === undefined) {
    throw new WorkerConfigError(
      "the EDGE_SIGNING_KEY secret is not set (openssl rand -hex 32 | wrangler secret put EDGE_SIGNING_KEY)",
    );
  }
  return parsed("EDGE_SIGNING_KEY", hex, parseSigningKeyHex, { secret: true });
}

/** R2 multipart part size in bytes, from `R2_PART_MIB`. */
export function partBytesFromEnv(env: Env): number {
  return (integer(env, "R2_PART_MIB", 5) ?? DEFAULTS.partMiB) * 1024 * 1024;
}

/** Snapshot refresh period in ms from `REFRESH_SECONDS`, or null when refreshes are off. */
export function refreshMsFromEnv(env: Env): number | null {
  const seconds = integer(env, "REFRESH_SECONDS", 60);
  return seconds === undefined ? null : seconds * 1000;
}

function optional(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}

type NumericVar =
  | "CHUNKS"
  | "URL_TTL_SECONDS"
  | "MAX_REQUEST_BYTES"
  | "AUTH_TTL_SECONDS"
  | "BODY_TIMEOUT_SECONDS"
  | "BUILD_BACKOFF_SECONDS"
  | "RESPONSE_CACHE_BYTES"
  | "R2_PART_MIB"
  | "REFRESH_SECONDS";

function integer(env: Env, name: NumericVar, min: number): number | undefined {
  const raw = optional(env[name]);
  if (raw === undefined) return undefined;
  return parsed(name, raw, (text) => parseIntAtLeast(text, min));
}

function httpUrl(name: string, value: string): string {
  return parsed(name, value, parseHttpUrl);
}

/**
 * Runs `parse` on the value of `name`, turning a malformed value into a `WorkerConfigError` that
 * quotes the value, unless it is a secret.
 */
function parsed<T>(
  name: string,
  value: string,
  parse: (text: string) => T,
  { secret = false } = {},
): T {
  try {
    return parse(value);
  } catch (error) {
    if (!(error instanceof ConfigValueError)) throw error;
    const got = secret ? "" : `, got '${redactCredentials(value)}'`;
    throw new WorkerConfigError(`${name} must be ${error.expected}${got}`);
  }
}
