/**
 * The value parsers of settings: each turns a setting's text into its value or throws
 * {@link ConfigValueError} saying what it expected (never quoting the text: keys are secret).
 */
import { redactCredentials } from "../../redact.ts";
/** A setting's text is not what the parser expected (the message never quotes it: keys are secret). */
export class ConfigValueError extends Error {
  override name = "ConfigValueError";

  /**
   * @param expected what was wanted, as a noun phrase (`"an integer >= 1"`)
   * @param value the text that was given
   */
  constructor(readonly expected: string, readonly value: string) {
    super(`expected ${expected}`);
  }
}

/** Parses a safe integer of at least `min` (blank text is no number, not 0). */
export function parseIntAtLeast(text: string, min: number): number {
  const n = text.trim() === "" ? NaN : Number(text);
  if (!Number.isSafeInteger(n) || n < min) throw new ConfigValueError(`an integer >= ${min}`, text);
  return n;
}

/**
 * Checks `text` is an http(s) URL without credentials and returns it without trailing slashes.
 *
 * Credentials in the URL (`https://user:pw@host`) are refused: the edge would send them on every
 * origin request, so every repository they can read would become clonable by anyone through the
 * edge, and they would travel into error messages and the snapshot manifest. Clients bring their
 * own credentials; the edge forwards them.
 */
export function parseHttpUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigValueError("a URL", text);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ConfigValueError("an http(s) URL", text);
  }
  if (url.username !== "" || url.password !== "") {
    throw new ConfigValueError(
      "a URL without credentials (the edge would expose every repository they can read; " +
        "clients send their own)",
      redactCredentials(text),
    );
  }
  return text.replace(/\/+$/, "");
}

/** Decodes a URL-signing key given as hex: at least 32 digits (16 bytes), an even count. */
export function parseSigningKeyHex(text: string): Uint8Array {
  if (!/^([0-9a-f]{2}){16,}$/i.test(text)) {
    throw new ConfigValueError("at least 32 hex digits", text);
  }
  return Uint8Array.from(text.match(/../g) ?? [], (pair) => parseInt(pair, 16));
}

/** Parses `https` or `http` (the scheme of multi-origin requests). */
export function parseScheme(text: string): "https" | "http" {
  if (text !== "https" && text !== "http") throw new ConfigValueError("https or http", text);
  return text;
}

/** A parser of one of `words` (`a, b or c` in its message). */
export function parseOneOf<T extends string>(words: readonly T[]): (text: string) => T {
  return (text) => {
    const t = text.trim().toLowerCase() as T;
    if (words.includes(t)) return t;
    throw new ConfigValueError(
      `${words.slice(0, -1).join(", ")} or ${words[words.length - 1]}`,
      text,
    );
  };
}

/** Parses `on` or `off` (also `true`/`false`, `1`/`0`, `yes`/`no`). */
export function parseOnOff(text: string): boolean {
  const t = text.trim().toLowerCase();
  if (["on", "true", "1", "yes"].includes(t)) return true;
  if (["off", "false", "0", "no"].includes(t)) return false;
  throw new ConfigValueError("on or off", text);
}

/** Checks `text` is a `redis://` or `rediss://` URL (Redis or Valkey) and returns it. */
export function parseRedisUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigValueError("a redis:// URL", text);
  }
  if (url.protocol !== "redis:" && url.protocol !== "rediss:") {
    throw new ConfigValueError("a redis:// or rediss:// URL", text);
  }
  if (url.hostname === "") throw new ConfigValueError("a redis:// URL with a host", text);
  return text;
}
