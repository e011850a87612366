/**
 * The Worker's log: the same records as the Deno server's (src/proxy/core/log.ts), each one JSON
 * string through `console` (`log`, `warn` or `error` by level), which Workers Logs and Logpush
 * collect. `LOG_LEVEL` sets the least level.
 */
import { createLogger, type Logger, type LogLevel } from "../../src/proxy/core/log.ts";

export function workerLogger(level: LogLevel): Logger {
  return createLogger({
    level,
    format: "json",
    write: (line, at) => {
      if (at === "error") console.error(line);
      else if (at === "warn") console.warn(line);
      else console.log(line);
    },
  });
}
