/**
 * The admin token check (`--admin-token`, the Worker's `ADMIN_TOKEN`), in one place for every
 * route that takes it (warm, status, the operator's page and JSON, metrics).
 *
 * Two forms carry the token:
 * - `Authorization: Bearer TOKEN`, for scripts and Prometheus (`authorization.credentials_file`);
 * - `Authorization: Basic base64(USER:TOKEN)`, any user name, the token as the password: what a
 *   browser sends after the prompt a `WWW-Authenticate: Basic` challenge opens, so the operator's
 *   page can be read in a browser (and Prometheus's `basic_auth` works too).
 *
 * A browser sends Basic credentials by itself on every request to the edge, cross-site ones
 * included, so Basic is accepted only where a request changes nothing (`basic: true`: GET pages,
 * JSON and metrics); a route that acts (POST `/_edge/warm`) takes Bearer only, which no page can
 * make a browser send: no cross-site request forgery.
 */

/** Whether to take the Basic form too (only routes that change nothing). */
export interface AdminAuthOptions {
  basic?: boolean;
}

/** Longest `Authorization` value read (a token is far shorter). */
const MAX_AUTHORIZATION = 4096;

/** Whether `authorization` carries `token`, compared in constant time for the token's length. */
export function isAdmin(
  authorization: string | undefined | null,
  token: string,
  opts: AdminAuthOptions = {},
): boolean {
  if (!token || !authorization || authorization.length > MAX_AUTHORIZATION) return false;
  const space = authorization.indexOf(" ");
  if (space < 0) return false;
  const scheme = authorization.slice(0, space).toLowerCase();
  const value = authorization.slice(space + 1).trim();
  if (scheme === "bearer") return sameSecret(value, token);
  if (scheme === "basic" && opts.basic) {
    const password = basicPassword(value);
    return password !== null && sameSecret(password, token);
  }
  return false;
}

/** The challenge a 401 for a browser carries: it makes the browser prompt for user and password. */
export const BASIC_CHALLENGE = 'Basic realm="gitedge operator", charset="UTF-8"';

/** The password of a Basic credential (`base64(user:password)`), or null if malformed. */
function basicPassword(encoded: string): string | null {
  let text: string;
  try {
    const bytes = Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0));
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
  const colon = text.indexOf(":");
  return colon < 0 ? null : text.slice(colon + 1);
}

function sameSecret(given: string, want: string): boolean {
  const a = new TextEncoder().encode(given);
  const b = new TextEncoder().encode(want);
  let diff = a.length ^ b.length;
  for (let i = 0; i < b.length; i++) diff |= b[i] ^ (a[i] ?? 0);
  return diff === 0;
}
