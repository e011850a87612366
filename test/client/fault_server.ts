/**
 * A small in-test HTTP file server for packfile-URI downloads: Range support, optional
 * per-chunk pacing, and a queue of faults per path (one consumed per request). It records every
 * request and the peak number of bodies in flight.
 */
import { SeededRandom } from "../support/random.ts";
import { git, GIT_ENV, gitBytes } from "../support/git.ts";

/** What the next request for a path gets instead of a normal answer. */
export type Fault =
  | { kind: "status"; status: number }
  | { kind: "truncate" }
  | { kind: "corrupt" }
  | { kind: "stall" }
  | { kind: "ignore-range" }
  | { kind: "bad-416" }
  | { kind: "wrong-range" };

/** One request as the server saw it. */
export interface RequestRecord {
  path: string;
  range: string | null;
  authorization: string | null;
}

/** A running server. */
export interface FaultServer extends AsyncDisposable {
  url(path: string): string;
  /** Queues faults for `path`; each request consumes one. */
  inject(path: string, ...faults: Fault[]): void;
  requests: RequestRecord[];
  maxActive(): number;
}

/** Starts the server on 127.0.0.1:0 serving `files` (path → bytes). */
export function startFaultServer(
  files: Map<string, Uint8Array>,
  opts: { chunkSize?: number; chunkDelayMs?: number } = {},
): FaultServer {
  const faults = new Map<string, Fault[]>();
  const requests: RequestRecord[] = [];
  let active = 0;
  let peak = 0;
  const chunkSize = opts.chunkSize ?? 16 * 1024;

  const body = (bytes: Uint8Array, fault: Fault | undefined) => {
    let offset = 0;
    let done = false;
    let cancelled: () => void = () => {};
    const whenCancelled = new Promise<void>((resolve) => (cancelled = resolve));
    const finish = () => {
      if (!done) active--;
      done = true;
    };
    active++;
    peak = Math.max(peak, active);
    const cut = fault?.kind === "truncate" || fault?.kind === "stall"
      ? Math.floor(bytes.length / 2)
      : bytes.length;
    return new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (opts.chunkDelayMs) await new Promise((r) => setTimeout(r, opts.chunkDelayMs));
        if (offset >= cut) {
          if (fault?.kind === "truncate") {
            finish();
            controller.error(new Error("injected truncation"));
            return;
          }
          if (fault?.kind === "stall") {
            await whenCancelled;
            return;
          }
          finish();
          controller.close();
          return;
        }
        const end = Math.min(cut, offset + chunkSize);
        controller.enqueue(bytes.slice(offset, end));
        offset = end;
      },
      cancel() {
        finish();
        cancelled();
      },
    });
  };

  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    const path = new URL(request.url).pathname;
    const range = request.headers.get("range");
    requests.push({ path, range, authorization: request.headers.get("authorization") });
    const fault = faults.get(path)?.shift();
    const file = files.get(path);
    if (fault?.kind === "status") return new Response("injected\n", { status: fault.status });
    if (!file) return new Response("not found\n", { status: 404 });
    let bytes = file;
    if (fault?.kind === "corrupt") {
      bytes = file.slice();
      bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    }
    const start = range ? Number(/^bytes=(\d+)-$/.exec(range)?.[1] ?? "0") : 0;
    if (range && fault?.kind === "bad-416") return new Response(null, { status: 416 });
    if (!range || fault?.kind === "ignore-range") {
      return new Response(body(bytes, fault), {
        headers: { "content-length": String(bytes.length) },
      });
    }
    const shift = fault?.kind === "wrong-range" ? 1 : 0;
    const slice = bytes.subarray(start - shift);
    return new Response(body(slice, fault), {
      status: 206,
      headers: {
        "content-range": `bytes ${start - shift}-${bytes.length - 1}/${bytes.length}`,
        "content-length": String(slice.length),
      },
    });
  });
  const port = (server.addr as Deno.NetAddr).port;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    inject(path, ...more) {
      faults.set(path, [...(faults.get(path) ?? []), ...more]);
    },
    requests,
    maxActive: () => peak,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  };
}

/** A real pack holding one random blob of `size` bytes; returns its bytes and checksum. */
export async function makePack(
  repo: string,
  size: number,
  seed: number,
): Promise<{ bytes: Uint8Array; hash: string }> {
  const data = new SeededRandom(seed).bytes(size);
  const oid = (await git(["hash-object", "-w", "--stdin"], { cwd: repo, stdin: data })).trim();
  const bytes = await gitBytes(["pack-objects", "--stdout", "-q"], {
    cwd: repo,
    stdin: new TextEncoder().encode(`${oid}\n`),
  });
  const hash = Array.from(bytes.subarray(bytes.length - 20), (b) => b.toString(16).padStart(2, "0"))
    .join("");
  return { bytes, hash };
}

/** `git init --bare` in `dir` with the test environment. */
export async function initBare(dir: string): Promise<string> {
  await git(["init", "-q", "--bare", dir], { env: GIT_ENV });
  return dir;
}
