/** `gitedge serve`: run the edge on Deno with the filesystem store. */
import { startDenoEdge } from "./server.ts";
import { GitMissingError } from "./pack_index_builder.ts";
import {
  type GivenSetting,
  resolveSettings,
  type ServeSettings,
  SettingError,
  type SettingKey,
  SETTINGS,
} from "../../src/proxy/settings.ts";
import { serveOptionsHelp } from "../../src/proxy/settings_doc.ts";
import { UsageError } from "../../src/client/errors.ts";

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
    if (s === undefined) throw new UsageError(`unknown option '${arg}'`);
    const text = eq > 0 ? arg.slice(eq + 1) : args[++i];
    if (text === undefined) throw new UsageError(`${flag} needs a value`);
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
    if (!(err instanceof UsageError || err instanceof SettingError)) throw err;
    console.error(`gitedge serve: ${err.message}\n\n${HELP}`);
    return 2;
  }
  let edge;
  try {
    edge = await startDenoEdge(settings);
  } catch (err) {
    if (!(err instanceof GitMissingError)) throw err;
    console.error(`gitedge serve: ${err.message}`);
    return 2;
  }
  console.log(`gitedge: listening on ${edge.url} (store ${settings.store})`);
  const stopped = Promise.withResolvers<void>();
  const onSignal = () => stopped.resolve();
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);
  await stopped.promise;
  await edge.stop();
  return 0;
}
