/**
 * The Worker's bindings (`Env`) and how they become the edge's settings. Vars come from
 * `wrangler.toml` `[vars]`, secrets from `wrangler secret put`; both arrive as strings, named and
 * checked by the settings table (`src/proxy/settings/table.ts`).
 */
import {
  type GivenSetting,
  resolveSettings,
  type WorkerSettings,
} from "../../src/proxy/settings/resolve.ts";
import { SETTINGS } from "../../src/proxy/settings/table.ts";
import type { DurableObjectNamespace, R2Bucket } from "./worker_types.ts";
import type { RepoSnapshotsRpc } from "./snapshot_rpc.ts";

/** Everything the Worker and its Durable Object are bound to. */
export interface Env {
  /** R2 bucket holding snapshot packs (and the builder's manifest copies). */
  PACKS: R2Bucket;
  /** One `RepoSnapshotsObject` Durable Object per repository. */
  REPO_SNAPSHOTS: DurableObjectNamespace<RepoSnapshotsRpc>;
  /** Vars and secrets: the Worker vars of the settings table (`EDGE_SIGNING_KEY`, `ORIGIN`, ...). */
  readonly [variable: string]: unknown;
}

/**
 * The settings from the Worker's vars and secrets: a blank var counts as unset, a list var
 * (`ALLOW_HOSTS`) is comma-separated, a number stands for its digits. Throws `SettingError` naming the var at fault.
 */
export function workerSettings(env: Env): WorkerSettings {
  const given: GivenSetting[] = [];
  for (const s of SETTINGS) {
    const value = s.workerVar === undefined ? undefined : env[s.workerVar];
    if (value === undefined || value === null) continue;
    // `[vars]` may hold TOML numbers (`CHUNKS = 4`): they arrive as numbers, read as their text.
    const text = String(value);
    const items = s.list ? text.split(",") : [text];
    for (const item of items.map((text) => text.trim()).filter((text) => text !== "")) {
      given.push({ key: s.key, source: s.workerVar!, text: item });
    }
  }
  return resolveSettings("worker", given);
}
