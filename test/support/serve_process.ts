/**
 * `gitedge serve` as a subprocess, the way an operator runs it: for cases that need the process
 * itself (its peak memory, whether it survives, its file descriptors).
 */

const CLI = new URL("../../edge/deno/cli.ts", import.meta.url).pathname;

/** A running `gitedge serve`. */
export interface ServeProcess extends AsyncDisposable {
  url: string;
  pid: number;
  /** Everything it wrote to stderr so far. */
  stderr(): string;
  /** Everything it wrote to stdout so far (its log: a JSON object per line). */
  stdout(): string;
  /** Peak resident memory so far in bytes (`VmHWM`, Linux). */
  peakRss(): Promise<number>;
  /** Current resident memory in bytes (`VmRSS`, Linux). */
  rss(): Promise<number>;
  /** Whether the process is still running. */
  alive(): boolean;
  /** Its exit code once it exits by itself (no signal is sent). */
  exited(): Promise<number>;
  /** SIGTERM, then waits for the exit; idempotent. Returns the exit code. */
  stop(): Promise<number>;
}

/** The serve process did not print its address. */
export class ServeStartError extends Error {
  override name = "ServeStartError";
}

/**
 * Starts `gitedge serve --port 0 ARGS` and waits for its `listening on` line. `gitedge` is the
 * checkout's CLI on this Deno unless `opts.gitedge` names another command (an installed bin).
 */
export async function startServeProcess(
  args: string[],
  opts: {
    env?: Record<string, string>;
    ulimitNofile?: number;
    /** `deno run`'s permission flags (default `--allow-all`). */
    permissions?: string[];
    /** How to run `gitedge` (default: this checkout's CLI on this Deno, with `permissions`). */
    gitedge?: string[];
  } = {},
): Promise<ServeProcess> {
  const permissions = opts.permissions ?? ["--allow-all"];
  const gitedge = opts.gitedge ?? [Deno.execPath(), "run", ...permissions, CLI];
  const deno = [...gitedge, "serve", "--port", "0", ...args];
  // `ulimit -n` for the server only, through sh: Deno has no setrlimit.
  const cmd = opts.ulimitNofile
    ? new Deno.Command("sh", {
      args: [
        "-c",
        `ulimit -n ${opts.ulimitNofile} && exec "$@"`,
        "sh",
        ...deno,
      ],
      env: opts.env,
      stdout: "piped",
      stderr: "piped",
    })
    : new Deno.Command(deno[0], {
      args: deno.slice(1),
      env: opts.env,
      stdout: "piped",
      stderr: "piped",
    });
  const child = cmd.spawn();
  let err = "";
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s.code;
  });
  const errDone = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({ write: (t) => void (err += t) }),
  ).catch(() => {});
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  let url: string | undefined;
  while (url === undefined) {
    const { done, value } = await lines.read();
    if (done) {
      await errDone;
      throw new ServeStartError(
        `gitedge serve exited before listening: ${err}`,
      );
    }
    out += value;
    url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
  }
  // Keep reading stdout (its log) so the server never blocks on a full pipe.
  const outDone = (async () => {
    for (;;) {
      const chunk = await lines.read().catch(() => ({ done: true, value: undefined }));
      if (chunk.done) return;
      out += chunk.value;
    }
  })();
  const memory = async (field: string): Promise<number> => {
    const text = await Deno.readTextFile(`/proc/${child.pid}/status`);
    const kb = Number(
      new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1],
    );
    return kb * 1024;
  };
  let stopped: Promise<number> | undefined;
  const stop = () =>
    stopped ??= (async () => {
      if (!exited) {
        try {
          child.kill("SIGTERM");
        } catch { /* already gone */ }
      }
      const code = await status;
      await Promise.all([outDone, errDone]);
      return code;
    })();
  return {
    url,
    pid: child.pid,
    stderr: () => err,
    stdout: () => out,
    peakRss: () => memory("VmHWM"),
    rss: () => memory("VmRSS"),
    alive: () => !exited,
    exited: () => status,
    stop,
    [Symbol.asyncDispose]: async () => void await stop(),
  };
}
