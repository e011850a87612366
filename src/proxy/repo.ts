/**
 * Mapping edge paths to origin repositories. The edge is never an open proxy: single-origin mode
 * maps every path onto one configured origin, multi-origin mode only reaches allow-listed hosts.
 */
import type { EdgeConfig, RepoRef } from "./deps.ts";
import { sha256 } from "@noble/hashes/sha2.js";

/** The smart-HTTP endpoints of a repository. */
export type GitEndpoint = "info/refs" | "git-upload-pack" | "git-receive-pack";

export interface ResolvedRequest {
  repo: RepoRef;
  endpoint: GitEndpoint;
}

export class RepoPathError extends Error {
  override name = "RepoPathError";
  constructor(message: string, readonly status: 400 | 403 | 404) {
    super(message);
  }
}

const ENDPOINTS: GitEndpoint[] = ["info/refs", "git-upload-pack", "git-receive-pack"];
const SEGMENT = /^[A-Za-z0-9._~-]+$/;
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
  return Array.from(digest.subarray(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The repository an edge path (without leading slash, e.g. `x/y.git`) refers to. */
export function resolveRepo(path: string, config: EdgeConfig): RepoRef {
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    throw new RepoPathError(`bad repository path: ${path}`, 400);
  }
  const segments = decoded.split("/");
  const badSegment = (s: string) => !SEGMENT.test(s) || s === "." || s === "..";
  if (config.origin) {
    if (segments.some(badSegment)) throw new RepoPathError(`bad repository path: ${path}`, 400);
    const base = config.origin.replace(/\/+$/, "");
    const originUrl = `${base}/${segments.join("/")}`;
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
  const originUrl = `${scheme}://${host}/${rest.join("/")}`;
  return { id: repoId(originUrl), originUrl, path: segments.join("/") };
}
