/**
 * `wrangler dev` run the way docs/workers.md runs it (the project's `wrangler.toml`, the signing key in
 * `.dev.vars`, `--var ORIGIN:<origin>`), with the processes it starts watched from outside
 * (/proc): wrangler's node process and its two workerd processes (wrangler's proxy in front, the
 * Worker itself behind), their descriptors, memory, and the TCP connections from each workerd to
 * the loopback listeners of the node process.
 *
 * Two ways to start it:
 * - `cli`: `npx wrangler@<version> dev` as such. Its DevTools inspector proxy (a Worker inside the
 *   front workerd) subscribes to the Worker's network events and sends every DevTools message it
 *   receives to the node process as an HTTP request of its own; one arrives per few KiB of every
 *   outgoing `fetch` body, and these connections pile up.
 * - `task`: `deno task worker:dev` (deno.json), the command of docs/workers.md: the same CLI with that
 *   inspector proxy turned off (see the task and docs/workers.md, "Locally").
 *
 * The wrangler version is the one deno.json's `worker:dev` task pins, for both.
 *
 * The copy of `wrangler.toml`, `.dev.vars`, the bundle wrangler writes (`.wrangler/`) and the
 * local R2 and Durable Object state all live in `dir`, outside the checkout.
 */
import { withinDeadline } from "./deadline.ts";
import { quietPort } from "./ports.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** How `wrangler dev` is started: the bare CLI, or the project's `deno task worker:dev`. */
export type WranglerDevMode = "cli" | "task";

export interface WranglerDevOptions {
  mode: WranglerDevMode;
  /** The origin's base URL (`--var ORIGIN:`). */
  origin: string;
  /** A directory of the caller's: the config copy, `.dev.vars`, the bundle and the local state. */
  dir: string;
  /**
   * Run this Worker instead of gitedge (a control, e.g. `bench/r2_control_worker.ts`; relative to
   * the repository root), with only an R2 bucket bound as `PACKS`.
   */
  entry?: string;
  /** More `--var NAME:VALUE` pairs. */
  vars?: Record<string, string>;
  /** Bound on the start (wrangler bundles the Worker and starts two workerd processes). */
  startMs?: number;
  /** Receives each line wrangler prints (stdout and stderr), for benches that keep a log. */
  onLine?: (line: string) => void;
}

/** One look at a process. */
export interface ProcessSample {
  pid: number;
  rssMiB: number;
  fds: number;
  cpuSeconds: number;
}

/** One look at everything `wrangler dev` runs. */
export interface WranglerDevSample {
  /** Milliseconds since the start. */
  atMs: number;
  node: ProcessSample;
  /** wrangler's front workerd (its proxy Worker, and the inspector proxy when on). */
  front: ProcessSample;
  /** The workerd running gitedge (Worker, Durable Objects, local R2). */
  worker: ProcessSample;
  /** TCP connections from either workerd to the node process's listeners, by TCP state. */
  toNode: Record<string, number>;
  /** Their total. */
  toNodeTotal: number;
}

export interface WranglerDev extends AsyncDisposable {
  url: string;
  mode: WranglerDevMode;
  /** The wrangler version run (deno.json's pin). */
  version: string;
  nodePid: number;
  frontPid: number;
  workerPid: number;
  sample(): Promise<WranglerDevSample>;
  stop(): Promise<void>;
}

/** `wrangler dev` did not start. */
export class WranglerDevError extends Error {
  override name = "WranglerDevError";
}

/** The `wrangler@x.y.z` deno.json's `worker:dev` task runs (through edge/cloudflare/dev.sh). */
export async function pinnedWrangler(): Promise<{ spec: string; version: string }> {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
  const task: string = config.tasks["worker:dev"];
  const script = task.includes("edge/cloudflare/dev.sh")
    ? await Deno.readTextFile(`${ROOT}edge/cloudflare/dev.sh`)
    : task;
  const match = /\b(wrangler@(\d+\.\d+\.\d+))\b/.exec(script);
  if (!match) throw new WranglerDevError(`deno.json's worker:dev task pins no wrangler: ${task}`);
  return { spec: match[1], version: match[2] };
}

/** A random 256-bit signing key, hex. */
function signingKey(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(32)),
    (b) => b.toString(16).padStart(2, "0"),
  )
    .join("");
}

interface ProcInfo {
  pid: number;
  ppid: number;
  comm: string;
  cmdline: string;
}

function readProc(pid: number): ProcInfo | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    const cmdline = Deno.readTextFileSync(`/proc/${pid}/cmdline`).replaceAll("\0", " ");
    return { pid, ppid, comm, cmdline };
  } catch {
    return null; // it ended while we looked
  }
}

/** Every live descendant of `root`. */
export function descendants(root: number): ProcInfo[] {
  const all: ProcInfo[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const info = readProc(Number(entry.name));
    if (info) all.push(info);
  }
  const found: ProcInfo[] = [];
  const parents = new Set([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const p of all) {
      if (!parents.has(p.pid) && parents.has(p.ppid)) {
        parents.add(p.pid);
        found.push(p);
        grew = true;
      }
    }
  }
  return found;
}

function processSample(pid: number): ProcessSample {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const rssMiB = Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
  let fds = 0;
  for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) fds++;
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { pid, rssMiB, fds, cpuSeconds: (Number(fields[11]) + Number(fields[12])) / 100 };
}

/** Socket inodes a process holds. */
function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  for (const entry of Deno.readDirSync(`/proc/${pid}/fd`)) {
    try {
      const target = Deno.readLinkSync(`/proc/${pid}/fd/${entry.name}`);
      const m = /^socket:\[(\d+)\]$/.exec(target);
      if (m) inodes.add(m[1]);
    } catch {
      // closed while we looked
    }
  }
  return inodes;
}

const TCP_STATES: Record<string, string> = {
  "01": "ESTABLISHED",
  "02": "SYN_SENT",
  "03": "SYN_RECV",
  "04": "FIN_WAIT1",
  "05": "FIN_WAIT2",
  "06": "TIME_WAIT",
  "07": "CLOSE",
  "08": "CLOSE_WAIT",
  "09": "LAST_ACK",
  "0A": "LISTEN",
  "0B": "CLOSING",
};

interface TcpSocket {
  localPort: number;
  remotePort: number;
  remoteLoopback: boolean;
  state: string;
  inode: string;
}

function tcpSockets(): TcpSocket[] {
  const sockets: TcpSocket[] = [];
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = Deno.readTextFileSync(file);
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const localPort = f[1].split(":")[1];
      const [remoteAddr, remotePort] = f[2].split(":");
      sockets.push({
        localPort: parseInt(localPort, 16),
        remotePort: parseInt(remotePort, 16),
        // 127.0.0.1 in /proc/net/tcp's byte order, or ::ffff:127.0.0.1 / ::1 in tcp6
        remoteLoopback: remoteAddr === "0100007F" || remoteAddr.endsWith("0100007F") ||
          remoteAddr === "00000000000000000000000001000000",
        state: TCP_STATES[f[3]] ?? f[3],
        inode: f[9],
      });
    }
  }
  return sockets;
}

/** Connections from `clients` to the ports `server` listens on, by state. */
function connectionsTo(server: number, clients: number[]): Record<string, number> {
  const sockets = tcpSockets();
  const serverInodes = socketInodes(server);
  const listening = new Set(
    sockets.filter((s) => s.state === "LISTEN" && serverInodes.has(s.inode)).map((s) =>
      s.localPort
    ),
  );
  const byState: Record<string, number> = {};
  for (const client of clients) {
    const inodes = socketInodes(client);
    for (const s of sockets) {
      if (!inodes.has(s.inode) || !s.remoteLoopback || !listening.has(s.remotePort)) continue;
      byState[s.state] = (byState[s.state] ?? 0) + 1;
    }
  }
  return byState;
}

/**
 * Starts `wrangler dev` (see the module doc) and waits until it serves. Stop it with `stop()` or
 * `await using`: wrangler's node process gets SIGINT (it stops its workerd processes), then
 * whatever is left of the tree it started is killed by pid.
 */
export async function startWranglerDev(opts: WranglerDevOptions): Promise<WranglerDev> {
  const { spec, version } = await pinnedWrangler();
  const toml = await Deno.readTextFile(`${ROOT}wrangler.toml`);
  const date = /^compatibility_date = .*$/m.exec(toml)![0];
  await Deno.writeTextFile(
    `${opts.dir}/wrangler.toml`,
    opts.entry === undefined
      ? toml.replace(/^main = .*$/m, `main = ${JSON.stringify(`${ROOT}edge/cloudflare/worker.ts`)}`)
      : `name = "control"\nmain = ${JSON.stringify(`${ROOT}${opts.entry}`)}\n${date}\n` +
        `[[r2_buckets]]\nbinding = "PACKS"\nbucket_name = "control"\n`,
  );
  await Deno.writeTextFile(`${opts.dir}/.dev.vars`, `EDGE_SIGNING_KEY=${signingKey()}\n`);
  // wrangler takes a port number, not 0.
  const port = quietPort();
  const vars = { ORIGIN: opts.origin, ...opts.vars };
  const args = [
    "-c",
    `${opts.dir}/wrangler.toml`,
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--persist-to",
    `${opts.dir}/state`,
    "--show-interactive-dev-session=false",
    ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
  ];
  const [bin, binArgs]: [string, string[]] = opts.mode === "task"
    ? [Deno.execPath(), ["task", "worker:dev", ...args]]
    : ["npx", ["--yes", spec, "dev", ...args]];
  const child = new Deno.Command(bin, {
    args: binArgs,
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    env: { WRANGLER_SEND_METRICS: "false", NO_COLOR: "1", FORCE_COLOR: "0" },
  }).spawn();
  /** wrangler's last lines, for the error when it exits early. */
  const lines: string[] = [];
  let ready: (url: string) => void;
  let exited: (error: Error) => void;
  const readyUrl = new Promise<string>((resolve, reject) => {
    ready = resolve;
    exited = reject;
  });
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    let rest = "";
    for await (const text of stream.pipeThrough(new TextDecoderStream())) {
      rest += text;
      const parts = rest.split("\n");
      rest = parts.pop()!;
      for (const line of parts) {
        lines.push(line);
        if (lines.length > 30) lines.shift();
        opts.onLine?.(line);
        const m = /Ready on (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
        if (m) ready(m[1]);
      }
    }
  };
  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
  child.status.then((s) =>
    exited(new WranglerDevError(`wrangler dev exited (${s.code}):\n${lines.join("\n")}`))
  );
  const seen = new Map<number, ProcInfo>();
  const remember = () => {
    for (const p of descendants(child.pid)) seen.set(p.pid, p);
  };
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    remember();
    const node = [...seen.values()].find((p) => p.cmdline.includes("wrangler-dist/cli.js"));
    if (node) {
      try {
        Deno.kill(node.pid, "SIGINT");
      } catch {
        // already gone
      }
    }
    const ended = await withinDeadline(child.status, "wrangler dev stopping", 15_000)
      .then(() => true, () => false);
    if (!ended) {
      try {
        child.kill("SIGTERM");
      } catch {
        // already gone
      }
    }
    await withinDeadline(child.status, "wrangler dev stopping", 15_000).catch(() => {
      child.kill("SIGKILL");
    });
    // Whatever of the tree is left (npx's children outlive it when it is killed), by pid.
    for (const p of seen.values()) {
      const now = readProc(p.pid);
      if (now && now.cmdline === p.cmdline) {
        try {
          Deno.kill(p.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    }
    await child.status;
    await pumps.catch(() => {});
  };
  let url: string;
  try {
    url = await withinDeadline(
      readyUrl,
      `wrangler dev (${opts.mode}) starting`,
      opts.startMs ?? 120_000,
    );
  } catch (error) {
    await stop();
    throw error;
  }
  remember();
  const node = [...seen.values()].find((p) => p.cmdline.includes("wrangler-dist/cli.js"));
  const workerds = [...seen.values()].filter((p) => p.comm === "workerd" && p.ppid === node?.pid);
  const front = workerds.find((p) => p.cmdline.includes(`--socket-addr=entry=127.0.0.1:${port}`));
  const worker = workerds.find((p) => p !== front);
  if (!node || !front || !worker) {
    await stop();
    throw new WranglerDevError(
      `wrangler dev's processes not found: ${[...seen.values()].map((p) => p.comm).join(", ")}`,
    );
  }
  const t0 = performance.now();
  return {
    url,
    mode: opts.mode,
    version,
    nodePid: node.pid,
    frontPid: front.pid,
    workerPid: worker.pid,
    sample: () => {
      const toNode = connectionsTo(node.pid, [front.pid, worker.pid]);
      return Promise.resolve({
        atMs: performance.now() - t0,
        node: processSample(node.pid),
        front: processSample(front.pid),
        worker: processSample(worker.pid),
        toNode,
        toNodeTotal: Object.values(toNode).reduce((a, b) => a + b, 0),
      });
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
