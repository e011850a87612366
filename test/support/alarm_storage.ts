import type { SnapshotStorage } from "../../src/proxy/snapshots/repo_snapshots.ts";

/**
 * `SnapshotStorage` as a Durable Object's storage behaves for `RepoSnapshots`: values are
 * structured-cloned on the way in and out, and the one alarm is recorded in `alarm` for the test
 * to fire by hand.
 */
export class AlarmStorage implements SnapshotStorage {
  readonly values = new Map<string, unknown>();
  alarm: number | null = null;

  get<T>(key: string): Promise<T | undefined> {
    return Promise.resolve(structuredClone(this.values.get(key)) as T | undefined);
  }

  put<T>(keyOrEntries: string | Record<string, T>, value?: T): Promise<void> {
    const entries = typeof keyOrEntries === "string" ? { [keyOrEntries]: value } : keyOrEntries;
    for (const [k, v] of Object.entries(entries)) this.values.set(k, structuredClone(v));
    return Promise.resolve();
  }

  delete(key: string): Promise<boolean> {
    return Promise.resolve(this.values.delete(key));
  }

  setAlarm(time: number | Date): Promise<void> {
    this.alarm = typeof time === "number" ? time : time.getTime();
    return Promise.resolve();
  }
}
