/**
 * `startRedis()`: Debian's `redis-server` on 127.0.0.1 (a free port, nothing saved to disk), for
 * the fleet's tests; `stop()` kills it and `restart()` brings it back empty on the same port (the
 * coordinator gone for a while).
 */
import { withinDeadline } from "./deadline.ts";
import { quietPort } from "./ports.ts";

export interface RedisServer extends AsyncDisposable {
  url: string;
  port: number;
  /** Kills the server (SIGKILL): the coordinator is unreachable until `restart()`. */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** Whether `redis-server` is installed (`.ci/run` installs it). */
export async function redisMissing(): Promise<boolean> {
  try {
    const out = await new Deno.Command("redis-server", { args: ["--version"], stdout: "null" })
      .output();
    return !out.success;
  } catch {
    return true;
  }
}

async function answers(port: number): Promise<boolean> {
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port });
    try {
      await conn.write(new TextEncoder().encode("PING\r\n"));
      const buf = new Uint8Array(16);
      const n = await conn.read(buf);
      return n !== null && new TextDecoder().decode(buf.subarray(0, n)).startsWith("+PONG");
    } finally {
      conn.close();
    }
  } catch {
    return false;
  }
}

export async function startRedis(): Promise<RedisServer> {
  const port = quietPort();
  let child: Deno.ChildProcess | null = null;
  const launch = async () => {
    child = new Deno.Command("redis-server", {
      args: ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
      stdout: "null",
      stderr: "null",
    }).spawn();
    const started = child;
    let exited = false;
    started.status.then(() => exited = true);
    await withinDeadline(
      (async () => {
        while (!await answers(port)) {
          // One that could not bind its port exits at once: say so, not a 20 s wait.
          if (exited) throw new Error(`redis-server exited at its start on port ${port}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      })(),
      "redis-server's start",
      20_000,
    );
  };
  const kill = async () => {
    const c = child;
    child = null;
    if (!c) return;
    try {
      c.kill("SIGKILL");
    } catch { /* gone */ }
    await c.status;
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill,
    restart: launch,
    stop: kill,
    [Symbol.asyncDispose]: kill,
  };
}
