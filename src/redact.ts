/**
 * Removing secrets from text that is shown or recorded: the client's messages, the edge's log
 * lines, and error messages the edge sends its clients.
 */

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

/** `text` with the `user:password@` of every URL in it replaced by `***@`, for messages and logs. */
export function redactCredentials(text: string): string {
  return text.replace(/(\b[a-z][a-z0-9+.-]*:\/\/)[^\/\s@]*@/gi, "$1***@");
}

/** `text` with every URL in it (and any credentials it carries) replaced by `by`. */
export function replaceUrls(text: string, by: string): string {
  return text.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s'"`)\]]*/gi, () => by);
}

/**
 * `error`'s message as it may be shown to clients (response bodies, `lastError` in status): URLs
 * (the origin's address and paths, credentials in them) and absolute filesystem paths of the
 * server removed. Origin errors name the endpoint instead (`origin.ts`); this is the net.
 */
export function publicMessage(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return replaceUrls(message, "<url>")
    .replace(/(^|[\s'"`(\[=])\/(?!\/)[^\s'"`)\]]*/g, "$1<path>");
}
