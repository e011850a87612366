/** `gitedge serve`: run the edge on Deno with the filesystem store. */
import { startDenoEdge } from "./server.ts";
import { DEFAULT_EDGE_CONFIG } from "../../src/proxy/deps.ts";
import {
  ConfigValueError,
  parseHttpUrl,
  parseIntAtLeast,
  parseSigningKeyHex,
  redactCredentials,
} from "../../src/proxy/settings.ts";

const HELP = `usage: gitedge serve [options]

Runs the edge proxy in front of an origin Git server (smart HTTP, protocol v2).

options:
  --origin URL          single-origin mode: /x/y.git is served from URL/x/y.git
  --allow-host HOST     multi-origin mode: /HOST/x/y.git is served from https://HOST/x/y.git;
                        repeat for each allowed host (never an open proxy)
  --port N              port to listen on (default 8080; 0 picks a free one and prints it)
  --host ADDR           address to bind (default 127.0.0.1)
  --store DIR           pack store directory (default .gitedge-store)
  --chunks N            max packs per snapshot layer (default ${DEFAULT_EDGE_CONFIG.chunks})
  --public-url URL      base URL for pack URIs (default: derived from each request)
  --url-ttl SECONDS     lifetime of signed pack URLs (default ${DEFAULT_EDGE_CONFIG.urlTtlSeconds})
  --max-request-bytes N largest protocol-v2 request the edge parses (default ${DEFAULT_EDGE_CONFIG.maxRequestBytes}:
                        a clone of 335,000 refs); pushes and v0/v1 requests stream through.
                        Parsed requests together hold at most 1.5 times this (then 503)
  --build-backoff SECONDS
                        after a failed snapshot build, clones start no build for this long,
                        doubling per failure in a row up to 64 times (default ${DEFAULT_EDGE_CONFIG.buildBackoffSeconds}; 0: off;
                        /_edge/warm always builds)
  --body-timeout SECONDS
                        a request body the edge parses must arrive whole within this (default ${DEFAULT_EDGE_CONFIG.bodyTimeoutSeconds}; else 408)
  --auth-ttl SECONDS    how long the origin's acceptance of a credential lets the edge answer
                        fetches from its snapshot alone (default ${DEFAULT_EDGE_CONFIG.authTtlSeconds}; 0: always ask the origin)
  --response-cache-bytes N
                        size of the cache of answers to fetches without 'have' (shallow, partial,
                        single-commit clones) in the store (default ${DEFAULT_EDGE_CONFIG.responseCacheBytes}; 0: off)
  --admin-token TOKEN   require 'Authorization: Bearer TOKEN' on /_edge/warm and /_edge/status
                        (or set GITEDGE_ADMIN_TOKEN)
  -h, --help            show this help

The URL-signing key is read from GITEDGE_SIGNING_KEY (hex, >= 32 chars) or kept in
DIR/signing.key (created on first start).`;

export class UsageError extends Error {
  override name = "UsageError";
}

export interface ServeOptions {
  origin?: string;
  allowHosts: string[];
  port: number;
  host: string;
  store: string;
  chunks: number;
  publicUrl?: string;
  urlTtl: number;
  maxRequestBytes: number;
  authTtl: number;
  bodyTimeout: number;
  buildBackoff: number;
  responseCacheBytes: number;
  adminToken?: string;
}

function positiveInt(flag: string, v: string, min = 1): number {
  return parsed(v, (text) => parseIntAtLeast(text, min), (expected) => `${flag} needs ${expected}`);
}

function httpUrl(flag: string, v: string): string {
  return parsed(
    v,
    parseHttpUrl,
    (expected) => `${flag} needs ${expected}, got '${redactCredentials(v)}'`,
  );
}

/** Runs `parse` on `value`, turning a malformed value into a `UsageError` worded by `message`. */
function parsed<T>(
  value: string,
  parse: (text: string) => T,
  message: (expected: string) => string,
): T {
  try {
    return parse(value);
  } catch (error) {
    if (!(error instanceof ConfigValueError)) throw error;
    throw new UsageError(message(error.expected));
  }
}

export function parseServeArgs(
  args: string[],
  env: (k: string) => string | undefined,
): ServeOptions {
  const o: ServeOptions = {
    allowHosts: [],
    port: 8080,
    host: "127.0.0.1",
    store: ".gitedge-store",
    chunks: DEFAULT_EDGE_CONFIG.chunks,
    urlTtl: DEFAULT_EDGE_CONFIG.urlTtlSeconds,
    maxRequestBytes: DEFAULT_EDGE_CONFIG.maxRequestBytes,
    authTtl: DEFAULT_EDGE_CONFIG.authTtlSeconds,
    bodyTimeout: DEFAULT_EDGE_CONFIG.bodyTimeoutSeconds,
    buildBackoff: DEFAULT_EDGE_CONFIG.buildBackoffSeconds,
    responseCacheBytes: DEFAULT_EDGE_CONFIG.responseCacheBytes,
    adminToken: env("GITEDGE_ADMIN_TOKEN"),
  };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const eq = arg.indexOf("=");
    const flag = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    const value = (): string => {
      if (eq > 0 && arg.startsWith("--")) return arg.slice(eq + 1);
      const v = args[++i];
      if (v === undefined) throw new UsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case "--origin":
        o.origin = httpUrl(flag, value());
        break;
      case "--allow-host":
        o.allowHosts.push(value().toLowerCase());
        break;
      case "--port":
        o.port = positiveInt(flag, value(), 0);
        break;
      case "--host":
        o.host = value();
        break;
      case "--store":
        o.store = value();
        break;
      case "--chunks":
        o.chunks = positiveInt(flag, value());
        break;
      case "--public-url":
        o.publicUrl = httpUrl(flag, value());
        break;
      case "--url-ttl":
        o.urlTtl = positiveInt(flag, value(), 60);
        break;
      case "--max-request-bytes":
        o.maxRequestBytes = positiveInt(flag, value(), 1024);
        break;
      case "--build-backoff":
        o.buildBackoff = positiveInt(flag, value(), 0);
        break;
      case "--body-timeout":
        o.bodyTimeout = positiveInt(flag, value(), 1);
        break;
      case "--auth-ttl":
        o.authTtl = positiveInt(flag, value(), 0);
        break;
      case "--response-cache-bytes":
        o.responseCacheBytes = positiveInt(flag, value(), 0);
        break;
      case "--admin-token":
        o.adminToken = value();
        break;
      default:
        throw new UsageError(`unknown option '${arg}'`);
    }
  }
  if (!o.origin && o.allowHosts.length === 0) {
    throw new UsageError("configure --origin URL or at least one --allow-host HOST");
  }
  if (o.origin && o.allowHosts.length) {
    throw new UsageError("--origin and --allow-host are exclusive");
  }
  return o;
}

function signingKeyFromEnv(hex: string | undefined): Uint8Array | undefined {
  if (!hex) return undefined;
  return parsed(hex, parseSigningKeyHex, (expected) => `GITEDGE_SIGNING_KEY must be ${expected}`);
}

export async function serveMain(args: string[]): Promise<number> {
  if (args.includes("-h") || args.includes("--help")) {
    console.log(HELP);
    return 0;
  }
  let opts: ServeOptions;
  let signingKey: Uint8Array | undefined;
  try {
    opts = parseServeArgs(args, (k) => Deno.env.get(k));
    signingKey = signingKeyFromEnv(Deno.env.get("GITEDGE_SIGNING_KEY"));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`gitedge serve: ${err.message}\n\n${HELP}`);
    return 2;
  }
  const edge = await startDenoEdge({
    store: opts.store,
    host: opts.host,
    port: opts.port,
    signingKey,
    config: {
      origin: opts.origin,
      allowHosts: opts.allowHosts.length ? opts.allowHosts : undefined,
      chunks: opts.chunks,
      publicUrl: opts.publicUrl,
      urlTtlSeconds: opts.urlTtl,
      maxRequestBytes: opts.maxRequestBytes,
      authTtlSeconds: opts.authTtl,
      bodyTimeoutSeconds: opts.bodyTimeout,
      buildBackoffSeconds: opts.buildBackoff,
      responseCacheBytes: opts.responseCacheBytes,
      adminToken: opts.adminToken,
    },
  });
  console.log(`gitedge: listening on ${edge.url} (store ${opts.store})`);
  const stopped = Promise.withResolvers<void>();
  const onSignal = () => stopped.resolve();
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  await stopped.promise;
  await edge.stop();
  return 0;
}
