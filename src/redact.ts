/** Removing secrets from text the client shows or records. */

/**
 * Returns `url` without any `user:password@` part, so it is safe to print or log. Text that is not
 * a URL is returned unchanged.
 */
export function redactUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  if (parsed.username === "" && parsed.password === "") return url;
  parsed.username = "";
  parsed.password = "";
  return parsed.toString();
}
