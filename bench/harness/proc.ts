/**
 * What Linux's /proc says about a process: CPU seconds, resident memory, open descriptors, and
 * the machine's load average. `pid` is a process id or `"self"`. Clock ticks are 1/100 s.
 */

/** A process: its id, or this process. */
export type Pid = number | "self";

/** CPU seconds (user + system) of a process itself and of its reaped children. */
export interface CpuTimes {
  own: number;
  children: number;
}

export function cpuTimes(pid: Pid = "self"): CpuTimes {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  // Fields after the command name, which may hold spaces and parentheses: state is [0].
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number);
  return { own: (f[11] + f[12]) / 100, children: (f[13] + f[14]) / 100 };
}

/** CPU seconds of a process and its reaped children. */
export function cpuSeconds(pid: Pid = "self"): number {
  const t = cpuTimes(pid);
  return t.own + t.children;
}

function statusKiB(pid: Pid, field: string): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1];
  if (kb === undefined) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Number(kb);
}

/** Resident set now, MiB. */
export function rssMiB(pid: Pid = "self"): number {
  return statusKiB(pid, "VmRSS") / 1024;
}

/** Peak resident set so far (VmHWM), MiB. */
export function peakRssMiB(pid: Pid = "self"): number {
  return statusKiB(pid, "VmHWM") / 1024;
}

/** Open file descriptors. */
export function openFds(pid: Pid = "self"): number {
  let n = 0;
  for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) n++;
  return n;
}

/** The 1, 5 and 15 minute load averages, as /proc/loadavg prints them. */
export function loadavg(): string {
  return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

/** The processes named `comm` whose parent is `parent` (this process by default). */
export function childPids(comm: string, parent: number = Deno.pid): number[] {
  const pids: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (name === comm && ppid === parent) pids.push(Number(entry.name));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}
