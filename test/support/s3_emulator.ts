/**
 * `startS3Emulator()`: an S3-compatible endpoint for tests, `s3rver` (an S3 emulator from npm,
 * named as such: no real S3-compatible server installs here from Debian or npm) in a subprocess
 * on 127.0.0.1, with a bucket `gitedge` in a fresh directory. `s3Store()` opens an
 * `S3PackStore` on it (path-style, the emulator's fixed credentials).
 */
import { S3PackStore, type S3PackStoreOptions } from "../../edge/deno/s3_store.ts";
import type { S3ClientConfig } from "@aws-sdk/client-s3";
import { withinDeadline } from "./deadline.ts";

const MAIN = new URL("./s3_emulator_main.ts", import.meta.url).pathname;

export interface S3Emulator extends AsyncDisposable {
  endpoint: string;
  bucket: string;
  /** The client settings that reach it (endpoint, region, path style, its credentials). */
  client: S3ClientConfig;
  /** An `S3PackStore` on the emulator's bucket under `prefix`. */
  store(prefix: string, opts?: Partial<S3PackStoreOptions>): S3PackStore;
  stop(): Promise<void>;
}

export async function startS3Emulator(): Promise<S3Emulator> {
  const dir = await Deno.makeTempDir({ prefix: "gitedge-s3-" });
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", MAIN, dir],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const port = await withinDeadline(
    (async () => {
      while (!text.includes("\n")) {
        const r = await reader.read();
        if (r.done) throw new Error("the S3 emulator exited before listening");
        text += r.value;
      }
      return JSON.parse(text.slice(0, text.indexOf("\n"))).port as number;
    })(),
    "the S3 emulator's start",
    30_000,
  );
  reader.releaseLock();
  const drained = child.stdout.cancel().catch(() => {});
  const endpoint = `http://127.0.0.1:${port}`;
  const client: S3ClientConfig = {
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
  };
  let stopped: Promise<void> | undefined;
  const stop = () =>
    stopped ??= (async () => {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
      await drained;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    })();
  return {
    endpoint,
    bucket: "gitedge",
    client,
    store: (prefix, opts = {}) =>
      new S3PackStore({
        bucket: "gitedge",
        prefix,
        ...opts,
        client: { ...client, ...opts.client },
      }),
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
