/**
 * The Deno server's graceful drain, on SIGTERM or SIGINT (`gitedge serve`): readiness answers 503
 * at once, so load balancers stop sending work; what is under way finishes; then the server
 * closes and the process exits 0.
 *
 * 1. Requests on connections open before the signal are served: a clone in the middle of its
 *    conversation (`ls-refs`, then `fetch`) finishes it. Connections accepted after the signal
 *    are served only pack downloads (signed URLs handed out before) and health; anything else is
 *    answered 503 with `Connection: close`. Stock git downloads a clone's packs one after
 *    another, each on a new connection: those keep working.
 * 2. A client handed packfile URIs is mid-clone until it has asked for as many packs (stock git
 *    downloads and indexes them one after another, each by a new connection): the drain waits
 *    for those, counted per client address over the last few minutes. Once no request is in
 *    flight, no such download is pending and nothing has moved for {@link DrainOptions.quietMs},
 *    the listener closes, the inner server finishes what it sent, and each connection ends when its
 *    last bytes reach the client.
 * 3. Snapshot builds still running are stopped (the process ends): a build leaves only temporary
 *    objects until it publishes, and the next build of that repository removes them and starts
 *    again (the next clone asks for it).
 *
 * At `--drain-timeout` whatever is still open is cut, and logged (`drain.cut`): connections,
 * requests in flight, builds by repository.
 */
import type { Front, FrontActivity } from "./front.ts";
import type { Logger } from "../../src/proxy/core/log.ts";

export interface DrainOptions {
  /** The most the whole drain takes; then the rest is cut. */
  timeoutMs: number;
  /** With nothing in flight, how long the edge waits for a clone's next pack download. */
  quietMs?: number;
  pollMs?: number;
}

export interface DrainTarget {
  front: Front;
  /** Stops the inner server gracefully: resolves once the responses it began are sent. */
  shutdownInner(): Promise<void>;
  /** Repositories with a snapshot build running. */
  runningBuilds(): string[];
  log: Logger;
}

/** What a drain cut (all zero and empty when everything finished). */
export interface DrainReport {
  durationMs: number;
  cutConnections: number;
  cutRequests: number;
  cutBuilds: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits for `work` until `deadline` (ms since epoch); true if it finished. */
async function until(work: Promise<unknown>, deadline: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((r) => {
    timer = setTimeout(() => r(false), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([work.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether anything is under way on the front's connections. */
function busy(a: FrontActivity, quietMs: number): boolean {
  return a.requests > 0 || a.writing > 0 || a.cloning > 0 ||
    Date.now() - a.lastActivity < quietMs;
}

/** Runs the drain (the caller has marked the edge draining); never throws. */
export async function drain(target: DrainTarget, opts: DrainOptions): Promise<DrainReport> {
  const start = Date.now();
  const deadline = start + opts.timeoutMs;
  const quietMs = Math.min(opts.quietMs ?? 1000, opts.timeoutMs);
  const pollMs = opts.pollMs ?? 50;
  const { front, log } = target;
  front.beginDrain();
  const before = front.activity();
  log.log("info", "drain.start", {
    timeoutMs: opts.timeoutMs,
    connections: before.open,
    requests: before.requests,
    cloning: before.cloning,
    builds: target.runningBuilds(),
  });
  while (Date.now() < deadline && busy(front.activity(), quietMs)) {
    await sleep(Math.min(pollMs, Math.max(1, deadline - Date.now())));
  }
  await front.stopAccepting();
  await until(target.shutdownInner(), deadline);
  await until(front.allClosed(), deadline);
  const left = front.activity();
  const report: DrainReport = {
    durationMs: Date.now() - start,
    cutConnections: left.open,
    cutRequests: left.requests,
    cutBuilds: target.runningBuilds(),
  };
  if (report.cutConnections > 0 || report.cutBuilds.length > 0) {
    log.log("warn", "drain.cut", {
      connections: report.cutConnections,
      requests: report.cutRequests,
      writing: left.writing,
      cloning: left.cloning,
      builds: report.cutBuilds,
    });
  }
  await front.closeAll();
  log.log("info", "drain.finish", { ...report });
  return report;
}
