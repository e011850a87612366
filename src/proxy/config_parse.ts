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

/** Checks `text` is an http(s) URL and returns it without trailing slashes. */
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
  return text.replace(/\/+$/, "");
}

/** Decodes a URL-signing key given as hex: at least 32 digits (16 bytes), an even count. */
export function parseSigningKeyHex(text: string): Uint8Array {
  if (!/^([0-9a-f]{2}){16,}$/i.test(text)) {
    throw new ConfigValueError("at least 32 hex digits", text);
  }
  return Uint8Array.from(text.match(/../g) ?? [], (pair) => parseInt(pair, 16));
}
