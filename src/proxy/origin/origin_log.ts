/** Origin calls in the log: every call that fails or answers 5xx, for requests and builds alike. */
import type { Clock, OriginFetch } from "../core/deps.ts";
import type { Logger } from "../core/log.ts";

/**
 * `originFetch` that logs an `origin.error` (warn) for a call that fails or answers 5xx, with
 * `context` (`repo`, `for`: `request` or `build`), and reports each answer's time to `onAnswer`.
 */
export function loggedOriginFetch(
  originFetch: OriginFetch,
  log: Logger,
  clock: Clock,
  context: Record<string, unknown>,
  onAnswer?: (ms: number, status: number) => void,
): OriginFetch {
  return async (request) => {
    const start = clock.now();
    const url = new URL(request.url);
    const where = { ...context, originUrl: `${url.origin}${url.pathname}` };
    let res: Response;
    try {
      res = await originFetch(request);
    } catch (error) {
      log.log("warn", "origin.error", { ...where, error, originMs: clock.now() - start });
      throw error;
    }
    const ms = clock.now() - start;
    onAnswer?.(ms, res.status);
    if (res.status >= 500) {
      log.log("warn", "origin.error", { ...where, status: res.status, originMs: ms });
    }
    return res;
  };
}
