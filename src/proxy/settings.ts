/**
 * Parsing of edge settings that arrive as text: `gitedge serve` flags and environment, and the
 * Worker's vars and secrets. Each parser throws {@link ConfigValueError} saying what it expected;
 * the caller names the setting and raises its own error type with its own wording.
 */

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

/** Parses a safe integer of at least `min`. */
export function parseIntAtLeast(text: string, min: number): number {
  const n = Number(text);
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

/** `text` with the `user:password@` of every URL in it replaced by `***@`, for messages and logs. */
export function redactCredentials(text: string): string {
  return text.replace(/(\b[a-z][a-z0-9+.-]*:\/\/)[^\/\s@]*@/gi, "$1***@");
}

/** Decodes a URL-signing key given as hex: at least 32 digits (16 bytes), an even count. */
export function parseSigningKeyHex(text: string): Uint8Array {
  if (!/^([0-9a-f]{2}){16,}$/i.test(text)) {
    throw new ConfigValueError("at least 32 hex digits", text);
  }
  return Uint8Array.from(text.match(/../g) ?? [], (pair) => parseInt(pair, 16));
}
