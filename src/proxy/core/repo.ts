/**
 * Mapping edge paths to origin repositories. The edge is never an open proxy: single-origin mode
 * maps every path onto one configured origin, multi-origin mode only reaches allow-listed hosts.
 */
import type { EdgeConfig } from "./config.ts";
import { sha256 } from "@noble/hashes/sha2.js";
import { EdgeHttpError } from "./errors.ts";
import { toHex } from "../../git/object_id.ts";

/** A repository behind the edge. */
export interface RepoRef {
  /** Stable storage id derived from `originUrl` (hex). */
  id: string;
  /** The origin's repository URL, without a trailing slash, e.g. `https://git.example/x/y.git`. */
  originUrl: string;
  /** The path the client used at the edge, e.g. `x/y.git` (or `host/x/y.git` in multi-origin mode). */
  path: string;
}

/** Credentials forwarded from a client to the origin. Held in memory only, never stored. */
export interface OriginAuth {
  headers: Record<string, string>;
}

/** The smart-HTTP endpoints of a repository. */
export type GitEndpoint = "info/refs" | "git-upload-pack" | "git-receive-pack";

export interface ResolvedRequest {
  repo: RepoRef;
  endpoint: GitEndpoint;
}

/** A repository path the edge refuses (bad, or its host not allowed): `status` to the client. */
export class RepoPathError extends EdgeHttpError {
  override name = "RepoPathError";
  constructor(message: string, override readonly status: 400 | 403 | 404) {
    super(message, status);
  }
}

const ENDPOINTS: GitEndpoint[] = ["info/refs", "git-upload-pack", "git-receive-pack"];
/** Whether a decoded segment holds a character none may: a control character or a backslash. */
function hasBadChar(segment: string): boolean {
  for (let i = 0; i < segment.length; i++) {
    const c = segment.charCodeAt(i);
    if (c < 0x20 || c === 0x7f || c === 0x5c) return true;
  }
  return false;
}
const HOST = /^[a-z0-9.-]+(:[0-9]{1,5})?$/;

/** Splits `/x/y.git/info/refs` into its repository path and endpoint, or returns undefined. */
export function splitGitPath(
  pathname: string,
): { path: string; endpoint: GitEndpoint } | undefined {
  for (const endpoint of ENDPOINTS) {
    const suffix = `/${endpoint}`;
    if (pathname.endsWith(suffix)) {
      const path = pathname.slice(1, pathname.length - suffix.length);
      if (path) return { path, endpoint };
    }
  }
  return undefined;
}

/** Stable storage id of an origin repository URL. */
export function repoId(originUrl: string): string {
  const digest = sha256(new TextEncoder().encode(originUrl));
  return toHex(digest.subarray(0, 16));
}

/**
 * A decoded path segment as it goes into the origin URL: percent-encoded where RFC 3986 wants
 * it, with the sub-delimiters, `:` and `@` kept as they are (so `a+b.git` stays `a+b.git`).
 */
export function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(
    /%(21|24|26|27|28|29|2A|2B|2C|3B|3D|3A|40)/g,
    (_, hex: string) => String.fromCharCode(parseInt(hex, 16)),
  );
}

/**
 * The repository an edge path (without leading slash, e.g. `x/y.git`; percent-encoded as in a
 * URL) refers to. Any segment the origin may serve is allowed (unicode, spaces, `+`, `@`), but
 * never `.`, `..`, an empty one, control characters or a backslash; the origin URL is rebuilt
 * from the decoded segments, so the same repository has one id however a client spelled it.
 */
export function resolveRepo(path: string, config: EdgeConfig): RepoRef {
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    throw new RepoPathError(`bad repository path: ${path}`, 400);
  }
  const segments = decoded.split("/");
  const badSegment = (s: string) => s === "" || s === "." || s === ".." || hasBadChar(s);
  if (config.origin) {
    if (segments.some(badSegment)) throw new RepoPathError(`bad repository path: ${path}`, 400);
    const base = config.origin.replace(/\/+$/, "");
    const originUrl = `${base}/${segments.map(encodeSegment).join("/")}`;
    return { id: repoId(originUrl), originUrl, path: segments.join("/") };
  }
  const [host, ...rest] = segments;
  if (!config.allowHosts?.length) {
    throw new RepoPathError("no origin is configured", 404);
  }
  if (!HOST.test(host) || rest.length === 0 || rest.some(badSegment)) {
    throw new RepoPathError(`bad repository path: ${path}`, 400);
  }
  if (!config.allowHosts.includes(host)) {
    throw new RepoPathError(`origin host ${host} is not allowed on this edge`, 403);
  }
  const scheme = config.multiOriginScheme ?? "https";
  const originUrl = `${scheme}://${host}/${rest.map(encodeSegment).join("/")}`;
  return { id: repoId(originUrl), originUrl, path: segments.join("/") };
}
