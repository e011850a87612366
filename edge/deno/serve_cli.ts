/** `gitedge serve`: run the edge on Deno with the filesystem store. */
import { EdgeStartError, startDenoEdge } from "./server.ts";
import { GitMissingError } from "./pack_index_builder.ts";
import {
  type GivenSetting,
  resolveSettings,
  type ServeSettings,
  SettingError,
} from "../../src/proxy/settings/resolve.ts";
import { type SettingKey, SETTINGS } from "../../src/proxy/settings/table.ts";
import { serveOptionsHelp } from "../../src/proxy/settings/settings_doc.ts";
import { createLogger } from "../../src/proxy/core/log.ts";

/** `gitedge serve`'s command line could not be understood (an unknown option, a missing value). */
export class ServeUsageError extends Error {
  override name = "ServeUsageError";
}

const HELP = `usage: gitedge serve [options]

Runs the edge proxy in front of an origin Git server (smart HTTP, protocol v2): --origin for one
origin, or --allow-host for each host of several.

${serveOptionsHelp()}`;

/**
 * `gitedge serve`'s flags (`--flag VALUE` or `--flag=VALUE`) and environment (`GITEDGE_<NAME>`,
 * a list comma-separated), resolved. A flag wins over its variable; a flag of either mode
 * (`--origin`, `--allow-host`) sets aside both modes' variables.
 */
export function parseServeArgs(
  args: string[],
  env: (name: string) => string | undefined,
): ServeSettings {
  const flags: GivenSetting[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const eq = arg.startsWith("--") ? arg.indexOf("=") : -1;
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const s = SETTINGS.find((s) => s.flag === flag);
    if (s === undefined) throw new ServeUsageError(`unknown option '${arg}'`);
    const text = eq > 0 ? arg.slice(eq + 1) : args[++i];
    if (text === undefined) throw new ServeUsageError(`${flag} needs a value`);
    flags.push({ key: s.key, source: flag, text });
  }
  const flagged = new Set(flags.map((g) => g.key));
  const MODES: SettingKey[] = ["origin", "allowHosts"];
  if (MODES.some((key) => flagged.has(key))) { for (const key of MODES) flagged.add(key); }
  const given: GivenSetting[] = [];
  for (const s of SETTINGS) {
    if (s.env === undefined || flagged.has(s.key)) continue;
    const text = env(s.env);
    if (text === undefined || text.trim() === "") continue;
    const items = s.list ? text.split(",").map((t) => t.trim()).filter((t) => t !== "") : [text];
    for (const item of items) given.push({ key: s.key, source: s.env, text: item });
  }
  return resolveSettings("serve", [...given, ...flags]);
}

export async function serveMain(args: string[]): Promise<number> {
  if (args.includes("-h") || args.includes("--help")) {
    console.log(HELP);
    return 0;
  }
  let settings: ServeSettings;
  try {
    settings = parseServeArgs(args, (name) => Deno.env.get(name));
  } catch (err) {
    if (!(err instanceof ServeUsageError || err instanceof SettingError)) throw err;
    console.error(`gitedge serve: ${err.message}\nsee 'gitedge serve --help'`);
    return 2;
  }
  const log = createLogger({
    level: settings.logLevel,
    format: settings.logFormat ?? (Deno.stdout.isTerminal() ? "text" : "json"),
    write: (line) => console.log(line),
  });
  log.log("info", "settings", settingsForLog(settings));
  let edge;
  try {
    edge = await startDenoEdge({ ...settings, log });
  } catch (err) {
    if (!(err instanceof GitMissingError || err instanceof EdgeStartError)) throw err;
    console.error(`gitedge serve: ${err.message}`);
    return 2;
  }
  log.log("info", "listening", {
    message: `listening on ${edge.url} (store ${settings.store})`,
    url: edge.url,
    store: settings.store,
  });
  // The first signal drains (edge/deno/drain.ts); a second one exits at once.
  const signalled = Promise.withResolvers<Deno.Signal>();
  let signals = 0;
  const onSignal = (signal: Deno.Signal) => () => {
    if (++signals === 1) return signalled.resolve(signal);
    log.log("warn", "drain.abort", { signal });
    Deno.exit(1);
  };
  const listeners = (["SIGINT", "SIGTERM"] as const).map((s) => [s, onSignal(s)] as const);
  for (const [s, fn] of listeners) Deno.addSignalListener(s, fn);
  const signal = await signalled.promise;
  log.log("info", "signal", { signal });
  await edge.drain({ timeoutMs: settings.drainTimeoutSeconds * 1000 });
  for (const [s, fn] of listeners) Deno.removeSignalListener(s, fn);
  return 0;
}

/** The settings as logged at start: every value, secrets as `set` (never their value). */
export function settingsForLog(settings: ServeSettings): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const s of SETTINGS) {
    const value = (s.edge ? settings.config : settings as unknown as Record<string, unknown>)[
      s.key as keyof typeof settings.config
    ];
    if (value === undefined) continue;
    out[s.key] = s.secret ? "set" : value;
  }
  return out;
}
