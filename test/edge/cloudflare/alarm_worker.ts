/**
 * Test fixture Worker: the gitedge Worker unchanged, except that its `RepoSnapshotsObject` arms the
 * refresh alarm 200 ms ahead instead of `REFRESH_SECONDS` (at least a minute) ahead, so a test can
 * watch the alarm fire in workerd. Which builds arm the alarm, and for when, is tested in
 * `test/proxy/snapshots/repo_snapshots_test.ts`.
 */
import worker, { RepoSnapshotsObject } from "../../../edge/cloudflare/worker.ts";
import type { Env } from "../../../edge/cloudflare/env.ts";
import type {
  DurableObjectState,
  DurableObjectStorage,
} from "../../../edge/cloudflare/worker_types.ts";

const ALARM_DELAY_MS = 200;

export class SoonAlarmSnapshots extends RepoSnapshotsObject {
  constructor(state: DurableObjectState, env: Env) {
    const storage = state.storage;
    const soon: DurableObjectStorage = {
      get: (key) => storage.get(key),
      put:
        ((keyOrEntries: string | Record<string, unknown>, value?: unknown) =>
          typeof keyOrEntries === "string"
            ? storage.put(keyOrEntries, value)
            : storage.put(keyOrEntries)) as DurableObjectStorage["put"],
      delete: (key) => storage.delete(key),
      getAlarm: () => storage.getAlarm(),
      setAlarm: () => storage.setAlarm(Date.now() + ALARM_DELAY_MS),
      deleteAlarm: () => storage.deleteAlarm(),
    };
    super(state, env, soon);
  }
}

export default worker;
