/** The store contract (store_contract.ts) on the filesystem store. */
import { FsPackStore } from "../../edge/deno/fs_store.ts";
import { tempDir } from "../support/git.ts";
import { storeContract } from "./store_contract.ts";

storeContract("fs", async () => {
  const dir = await tempDir();
  return {
    store: new FsPackStore(dir.path),
    [Symbol.asyncDispose]: () => dir[Symbol.asyncDispose](),
  };
}, { largeBytes: 11 * 1024 * 1024 });
