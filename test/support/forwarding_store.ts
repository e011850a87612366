/**
 * A PackStore that hands every call to another one: tests extend it and override the one or two
 * calls they want to count or break.
 */
import type { ByteRange, PackStore } from "../../src/storage/store.ts";

export class ForwardingStore implements PackStore {
  constructor(readonly inner: PackStore) {}
  put(key: string, body: ReadableStream<Uint8Array>): Promise<{ size: number }> {
    return this.inner.put(key, body);
  }
  get(key: string, range?: ByteRange) {
    return this.inner.get(key, range);
  }
  head(key: string) {
    return this.inner.head(key);
  }
  delete(key: string) {
    return this.inner.delete(key);
  }
  list(prefix: string) {
    return this.inner.list(prefix);
  }
}
