/**
 * A process and its descendants from /proc (Linux), for tests that a signal to a supervised
 * command leaves nothing running: `descendants(pid)`, `alive(pid)` (zombies count as gone),
 * `killTree(pids)` (SIGKILL, for a test's cleanup).
 */

/** Every process under `pid` (children, their children, …). */
export async function descendants(pid: number): Promise<number[]> {
  const parentOf = new Map<number, number>();
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    const stat = await Deno.readTextFile(`/proc/${e.name}/stat`).catch(() => "");
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (ppid) parentOf.set(Number(e.name), ppid);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [child, parent] of parentOf) {
      if (parent === p) {
        out.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return out;
}

/** Whether `pid` runs (a zombie does not). */
export function alive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

/** SIGKILL to each of `pids` still running. */
export function killTree(pids: Iterable<number>): void {
  for (const pid of pids) {
    try {
      if (alive(pid)) Deno.kill(pid, "SIGKILL");
    } catch { /* gone */ }
  }
}

/** Waits up to `ms` for every one of `pids` to be gone; returns those still running. */
export async function stillRunning(pids: number[], ms = 2000): Promise<number[]> {
  for (let waited = 0; waited < ms && pids.some(alive); waited += 100) {
    await new Promise((r) => setTimeout(r, 100));
  }
  return pids.filter(alive);
}
