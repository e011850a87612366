/**
 * The one validation of settings ({@link resolveSettings}): turns their text, as given to
 * `gitedge serve` or the Worker, into an {@link EdgeConfig} plus each runtime's own extras. The
 * value parsers throw `ConfigValueError`; this turns it into one {@link SettingError} naming the
 * setting as it was given (never quoting a secret).
 */
import type { EdgeConfig } from "../core/config.ts";
import { redactCredentials } from "../../redact.ts";
import { ConfigValueError } from "./parsers.ts";
import {
  appliesTo,
  type ServeExtras,
  type Setting,
  type SettingKey,
  SETTINGS,
  type SettingsSource,
  type WorkerExtras,
} from "./table.ts";

/** A setting's value or the settings together are wrong; the message names the setting. */
export class SettingError extends Error {
  override name = "SettingError";

  /**
   * @param setting the key of the setting at fault (the first, for a rule between two)
   * @param message what is wrong, naming the setting as the user gave it
   */
  constructor(readonly setting: SettingKey, message: string) {
    super(message);
  }
}

/** One value as given: which setting, where from (`--chunks`, `CHUNKS`), its text. */
export interface GivenSetting {
  key: SettingKey;
  source: string;
  text: string;
}

/** The settings `gitedge serve` runs with. */
export interface ServeSettings extends ServeExtras {
  config: EdgeConfig;
}

/** The settings a Worker runs with. */
export interface WorkerSettings extends WorkerExtras {
  config: EdgeConfig;
}

const BY_KEY = new Map(SETTINGS.map((s) => [s.key, s]));

/** The setting named `key`. */
export function setting(key: SettingKey): Setting {
  const found = BY_KEY.get(key);
  if (found === undefined) throw new Error(`no setting ${key}`);
  return found;
}

/** How `from` names `setting` in a message about it (`orEnv`: a flag and its variable). */
function nameIn(from: SettingsSource, s: Setting, orEnv = false): string {
  if (from === "serve") {
    if (!s.flag) return s.env ?? s.key;
    return `${s.flag}${s.arg ? ` ${s.arg}` : ""}${orEnv && s.env ? ` or ${s.env}` : ""}`;
  }
  if (from === "worker") return s.workerVar ?? s.key;
  return s.key;
}

/**
 * The one validation of settings: parses every given value (a later one of a setting replaces an
 * earlier one; items of a list add up), fills in defaults, and checks the rules between settings.
 * Throws {@link SettingError}.
 */
export function resolveSettings(from: "serve", given: readonly GivenSetting[]): ServeSettings;
export function resolveSettings(from: "worker", given: readonly GivenSetting[]): WorkerSettings;
export function resolveSettings(
  from: "config",
  given: readonly GivenSetting[],
): { config: EdgeConfig };
export function resolveSettings(
  from: SettingsSource,
  given: readonly GivenSetting[],
): { config: EdgeConfig } {
  const values = new Map<SettingKey, unknown>();
  for (const { key, source, text } of given) {
    const s = setting(key);
    if (!appliesTo(s, from)) throw new SettingError(key, `${source} is not a setting here`);
    const value = parseGiven(s, source, text);
    if (s.list) values.set(key, [...(values.get(key) as unknown[] | undefined) ?? [], value]);
    else values.set(key, value);
  }
  for (const s of SETTINGS) {
    if (!appliesTo(s, from) || values.has(s.key)) continue;
    if (s.required?.from === from) {
      throw new SettingError(s.key, `${nameIn(from, s, true)} is not set (${s.required.hint})`);
    }
    if (s.default !== undefined) values.set(s.key, s.default);
  }
  const origin = setting("origin");
  const allowHosts = setting("allowHosts");
  const hosts = values.get("allowHosts") as string[] | undefined;
  if (hosts?.length === 0) values.delete("allowHosts");
  if (!values.has("origin") && !values.has("allowHosts")) {
    throw new SettingError(
      "origin",
      `set ${nameIn(from, origin, true)} (single origin) or ${
        nameIn(from, allowHosts, true)
      } (multi-origin)`,
    );
  }
  if (values.has("origin") && values.has("allowHosts")) {
    throw new SettingError(
      "origin",
      `${nameIn(from, origin)} and ${nameIn(from, allowHosts)} are exclusive: set only one`,
    );
  }
  const config: Record<string, unknown> = {};
  const resolved: Record<string, unknown> = { config };
  for (const [key, value] of values) {
    if (setting(key).edge) config[key] = value;
    else resolved[key] = value;
  }
  return resolved as { config: EdgeConfig };
}

function parseGiven(s: Setting, source: string, text: string): unknown {
  try {
    return s.parse(text);
  } catch (error) {
    if (!(error instanceof ConfigValueError)) throw error;
    const verb = source.startsWith("-") ? "needs" : "must be";
    const got = s.secret ? "" : `, got '${redactCredentials(error.value)}'`;
    throw new SettingError(s.key, `${source} ${verb} ${error.expected}${got}`);
  }
}

/**
 * Checks an {@link EdgeConfig} given in code (`startDenoEdge`, tests) by the same rules as text,
 * and fills in its defaults. Throws {@link SettingError} naming the field.
 */
export function checkEdgeConfig(config: Partial<EdgeConfig>): EdgeConfig {
  const given: GivenSetting[] = [];
  for (const s of SETTINGS) {
    if (!s.edge) continue;
    const value = config[s.key as keyof EdgeConfig];
    if (value === undefined) continue;
    for (const item of Array.isArray(value) ? value : [value]) {
      given.push({ key: s.key, source: s.key, text: String(item) });
    }
  }
  return resolveSettings("config", given).config;
}
