/**
 * `StoreSnapshotStorage`: a repository's snapshot state for `RepoSnapshots` in process memory,
 * with its counters (`meta`: builds, the last build, failures) also kept in the pack store
 * (`repos/<id>/state.json`), so they survive a restart of the Deno server. The manifest has its
 * own copy in the store already (the builder's); nothing else needs to outlive the process.
 */
import { getBytes, type PackStore, putBytes } from "../../storage/store.ts";
import { MemorySnapshotStorage, META_KEY, type SnapshotStorage } from "./repo_snapshots.ts";
import { stateKey } from "../core/store_layout.ts";

export class StoreSnapshotStorage implements SnapshotStorage {
  readonly #memory = new MemorySnapshotStorage();
  readonly #store: PackStore;
  readonly #key: string;
  #loaded = false;

  constructor(store: PackStore, repoId: string) {
    this.#store = store;
    this.#key = stateKey(repoId);
  }

  async get<T>(key: string): Promise<T | undefined> {
    if (key === META_KEY && !this.#loaded) {
      this.#loaded = true;
      const bytes = await getBytes(this.#store, this.#key).catch(() => null);
      if (bytes) {
        try {
          await this.#memory.put(META_KEY, JSON.parse(new TextDecoder().decode(bytes)));
        } catch {
          console.error(`gitedge: ${this.#key} is damaged; build counters start again`);
        }
      }
    }
    return await this.#memory.get<T>(key);
  }

  async put<T>(keyOrEntries: string | Record<string, T>, value?: T): Promise<void> {
    const entries = typeof keyOrEntries === "string" ? { [keyOrEntries]: value } : keyOrEntries;
    await this.#memory.put(entries);
    if (META_KEY in entries) {
      this.#loaded = true;
      const text = JSON.stringify(entries[META_KEY]);
      await putBytes(this.#store, this.#key, new TextEncoder().encode(text));
    }
  }

  delete(key: string): Promise<boolean> {
    return this.#memory.delete(key);
  }

  setAlarm(): Promise<void> {
    return Promise.reject(new Error("StoreSnapshotStorage has no alarms: set refreshMs to null"));
  }
}
