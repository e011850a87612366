/**
 * Signed, expiring pack URLs: HMAC-SHA-256 over the pack path and the expiry. A URL handed out in
 * a `packfile-uris` section works until it expires; anything else is refused.
 */

const encoder = new TextEncoder();

/**
 * In a fleet, a URL one node signed is checked on another node's clock: it is accepted this long
 * past its expiry, so clocks up to this far apart never refuse a URL still valid where it was
 * signed. Eviction spares pinned packs longer still (`FLEET_CLOCK_SLACK_MS`, repo_registry.ts).
 */
export const FLEET_URL_LEEWAY_SECONDS = 15;

export class UrlSigner {
  readonly #key: Promise<CryptoKey>;
  readonly #leeway: number;

  /** `leewaySeconds`: how long past its expiry a URL is still accepted (a fleet's clocks). */
  constructor(secret: Uint8Array, leewaySeconds = 0) {
    this.#leeway = leewaySeconds;
    if (secret.byteLength < 16) throw new Error("signing key must be at least 16 bytes");
    this.#key = crypto.subtle.importKey(
      "raw",
      secret as Uint8Array<ArrayBuffer>,
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign", "verify"],
    );
  }

  /** The signature (base64url) of `path` valid until `expires` (seconds since epoch). */
  async sign(path: string, expires: number): Promise<string> {
    const mac = await crypto.subtle.sign("HMAC", await this.#key, message(path, expires));
    return toBase64Url(new Uint8Array(mac));
  }

  /**
   * Whether `signature` is valid for `path` and `expires` and `expires` (plus the leeway) is not
   * past `nowSeconds`.
   */
  async verify(
    path: string,
    expires: number,
    signature: string,
    nowSeconds: number,
  ): Promise<boolean> {
    if (!Number.isSafeInteger(expires) || expires + this.#leeway < nowSeconds) return false;
    const mac = fromBase64Url(signature);
    if (!mac) return false;
    return await crypto.subtle.verify("HMAC", await this.#key, mac, message(path, expires));
  }
}

function message(path: string, expires: number): Uint8Array<ArrayBuffer> {
  return encoder.encode(`${path}\n${expires}`);
}

function toBase64Url(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function fromBase64Url(text: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(text)) return undefined;
  const b64 = text.replaceAll("-", "+").replaceAll("_", "/");
  try {
    const bin = atob(b64 + "=".repeat((4 - b64.length % 4) % 4));
    return Uint8Array.from(bin, (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}

/**
 * Expiry for a URL issued at `nowSeconds` that must live at least `ttl` seconds: rounded up to a
 * bucket of `ttl / 4`, so URLs issued close together are identical and caches can share them.
 */
export function expiryFor(nowSeconds: number, ttl: number): number {
  const bucket = Math.max(1, Math.floor(ttl / 4));
  return Math.ceil((nowSeconds + ttl) / bucket) * bucket;
}
