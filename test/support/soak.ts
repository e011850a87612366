/**
 * The soak: many clones of kinds (cold, warm by URI, shallow, blob:none, fetch into an existing
 * clone) through a real `gitedge serve` process (filesystem store) in front of a real origin,
 * with bounded concurrency, pushes at the origin meanwhile and an edge restart (SIGTERM, start
 * again on the same port and store) in the middle. Every finished clone is `git fsck --full`
 * checked and its refs must equal the origin's refs at the time it started or later.
 *
 * Used by `bench/soak.ts` (default 200 clones) and `test/proxy/soak_test.ts` (a short run).
 */
import { addCommits, makeRepo } from "./fixtures.ts";
import { git, GIT_ENV, GitCommandError, tempDir } from "./git.ts";
import { startOrigin } from "./origin.ts";
import { refsOf } from "./repo_compare.ts";
import { type ServeProcess, startServeProcess } from "./serve_process.ts";

/** The kinds of clone the soak runs, in rotation. */
export const SOAK_KINDS = ["cold", "warm", "shallow", "blobless", "fetch"] as const;
export type SoakKind = typeof SOAK_KINDS[number];

/** Options for {@link runSoak}. */
export interface SoakOptions {
  /** Clones in all (default 200). */
  clones?: number;
  /** Clones running at once (default 4). */
  concurrency?: number;
  /** A push at the origin before every `pushEvery`-th clone (default 10). */
  pushEvery?: number;
  /** Restart the edge after this many clones started (default: half of them). */
  restartAfter?: number;
  /** Fixture size: commits on main (default 40). */
  commits?: number;
  /** Fixture size: random binary bytes (default 2 MB). */
  binaryBytes?: number;
  /** Progress lines go here (default: nowhere). */
  log?: (line: string) => void;
}

/** One clone that did not finish as it should. */
export interface SoakFailure {
  index: number;
  kind: SoakKind;
  attempt: number;
  message: string;
}

/** What {@link runSoak} measured. */
export interface SoakReport {
  clones: number;
  byKind: Record<SoakKind, number>;
  /** Attempts that failed while the edge was restarting (each retried). */
  cutByRestart: SoakFailure[];
  /** Every other failure: a clone, an fsck or a refs check that went wrong. */
  failures: SoakFailure[];
  fsckChecked: number;
  pushes: number;
  restarts: number;
  originRequests: number;
  originFetches: number;
  wallMs: number;
}

const REPO = "soak.git";
const TOKEN = "soak-admin-token";

/** Runs the soak and returns its report; throws only if the harness itself cannot run. */
export async function runSoak(opts: SoakOptions = {}): Promise<SoakReport> {
  const clones = opts.clones ?? 200;
  const concurrency = opts.concurrency ?? 4;
  const pushEvery = opts.pushEvery ?? 10;
  const restartAfter = opts.restartAfter ?? Math.floor(clones / 2);
  const log = opts.log ?? (() => {});
  const started = performance.now();

  await using origin = await startOrigin();
  await using dir = await tempDir("gitedge-soak-");
  await makeRepo(origin, REPO, {
    commits: opts.commits ?? 40,
    binaryBytes: opts.binaryBytes ?? 2_000_000,
  });
  const bare = `${origin.root}/${REPO}`;
  /** The origin's refs after each push; a clone may see any state from when it started on. */
  const states: Record<string, string>[] = [await refsOf(bare)];
  delete states[0].HEAD;

  const store = `${dir.path}/store`;
  const env = { ...GIT_ENV, GITEDGE_ADMIN_TOKEN: TOKEN };
  let edge: ServeProcess = await startServeProcess(
    ["--origin", origin.url, "--store", store],
    { env },
  );
  const url = edge.url;
  const port = new URL(url).port;
  const repoUrl = `${url}/${REPO}`;
  const warmed = await fetch(`${url}/_edge/warm/${REPO}`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  const warmBody = await warmed.text();
  if (!warmed.ok) throw new Error(`warming the edge: ${warmed.status} ${warmBody}`);

  // The existing clone that every "fetch" copies and fetches into: made direct from the origin.
  const base = `${dir.path}/base`;
  await git(["clone", "-q", origin.repoUrl(REPO), base]);
  await git(["remote", "set-url", "origin", repoUrl], { cwd: base });

  const report: SoakReport = {
    clones,
    byKind: { cold: 0, warm: 0, shallow: 0, blobless: 0, fetch: 0 },
    cutByRestart: [],
    failures: [],
    fsckChecked: 0,
    pushes: 0,
    restarts: 0,
    originRequests: 0,
    originFetches: 0,
    wallMs: 0,
  };

  // The restart window: attempts overlapping it may be cut (counted apart and retried).
  let restarting: Promise<void> | undefined;
  let windowOpen = -1;
  let windowClose = -1;
  let pushing: Promise<void> = Promise.resolve();

  const push = () =>
    pushing = pushing.then(async () => {
      const { refs } = await addCommits(origin, REPO, { commits: 2 });
      delete refs.HEAD;
      states.push(refs);
      report.pushes++;
    });

  const restart = async () => {
    windowOpen = performance.now();
    const code = await edge.stop();
    if (code !== 0) {
      report.failures.push({
        index: -1,
        kind: "cold",
        attempt: 0,
        message: `edge exited ${code} on SIGTERM: ${edge.stderr()}`,
      });
    }
    edge = await startServeProcess(
      ["--origin", origin.url, "--store", store, "--port", port],
      { env },
    );
    if (edge.url !== url) throw new Error(`restarted edge at ${edge.url}, not ${url}`);
    report.restarts++;
    windowClose = performance.now();
    log(`restarted the edge in ${(windowClose - windowOpen).toFixed(0)} ms`);
  };

  /** One attempt of clone `index`; throws on any failure, with a message. */
  const attempt = async (index: number, kind: SoakKind, n: number) => {
    const target = `${dir.path}/c${index}-${n}`;
    const since = states.length - 1;
    try {
      const plain = ["-c", "protocol.version=2"];
      switch (kind) {
        case "cold":
          await git([...plain, "clone", "-q", repoUrl, target]);
          break;
        case "warm":
          await git([...plain, "-c", "fetch.uriProtocols=http", "clone", "-q", repoUrl, target]);
          break;
        case "shallow":
          await git([...plain, "clone", "-q", "--depth", "1", repoUrl, target]);
          break;
        case "blobless":
          await git([...plain, "clone", "-q", "--filter=blob:none", repoUrl, target]);
          break;
        case "fetch":
          await Deno.mkdir(target);
          await new Deno.Command("cp", { args: ["-a", `${base}/.`, target] }).output();
          await git([...plain, "-c", "fetch.uriProtocols=http", "fetch", "-q", "origin"], {
            cwd: target,
          });
          break;
      }
      await git(["fsck", "--full", "--no-progress"], { cwd: target });
      report.fsckChecked++;
      const got = await refsOf(target);
      checkRefs(kind, got, states.slice(since));
    } finally {
      await Deno.remove(target, { recursive: true }).catch(() => {});
    }
  };

  let next = 0;
  const worker = async () => {
    while (next < clones) {
      const index = next++;
      const kind = SOAK_KINDS[index % SOAK_KINDS.length];
      if (index > 0 && index % pushEvery === 0) void push();
      if (index === restartAfter && !restarting) restarting = restart();
      for (let n = 0;; n++) {
        const t0 = performance.now();
        try {
          await attempt(index, kind, n);
          report.byKind[kind]++;
          break;
        } catch (e) {
          const t1 = performance.now();
          const failure = { index, kind, attempt: n, message: messageOf(e) };
          const overlaps = windowOpen >= 0 && t0 <= (windowClose < 0 ? t1 : windowClose) &&
            t1 >= windowOpen;
          if (overlaps && n === 0 && !(e instanceof RefsMismatch)) {
            report.cutByRestart.push(failure);
            log(`clone ${index} (${kind}) cut by the restart: ${failure.message}`);
            await restarting;
            continue;
          }
          report.failures.push(failure);
          log(`clone ${index} (${kind}) FAILED: ${failure.message}`);
          break;
        }
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
    await restarting;
    await pushing;
  } finally {
    await restarting?.catch(() => {});
    await edge.stop();
  }
  report.originRequests = origin.stats.requests;
  report.originFetches = origin.stats.commands.fetch ?? 0;
  report.wallMs = performance.now() - started;
  return report;
}

class RefsMismatch extends Error {
  override name = "RefsMismatch";
}

/**
 * A clone's refs, as origin refs (`refs/remotes/origin/X` is `refs/heads/X`), must equal one
 * state of the origin from `states` (the one at its start or a later one): all of them, or for a
 * shallow clone (single branch) the branch it took.
 */
function checkRefs(kind: SoakKind, got: Record<string, string>, states: Record<string, string>[]) {
  const mapped: Record<string, string> = {};
  for (const [name, id] of Object.entries(got)) {
    if (name === "HEAD" || name === "refs/remotes/origin/HEAD") continue;
    if (name.startsWith("refs/remotes/origin/")) {
      mapped[`refs/heads/${name.slice("refs/remotes/origin/".length)}`] = id;
    } else if (name.startsWith("refs/tags/")) mapped[name] = id;
  }
  for (const state of states) {
    const same = Object.entries(mapped).every(([n, id]) => state[n] === id) &&
      (kind === "shallow"
        ? mapped["refs/heads/main"] !== undefined
        : Object.keys(state).every((n) => mapped[n] === state[n]));
    if (same) return;
  }
  throw new RefsMismatch(
    `refs match no origin state since the clone started: ${JSON.stringify(mapped)}; ` +
      `origin main was ${states.map((s) => s["refs/heads/main"]?.slice(0, 8)).join(", ")}`,
  );
}

function messageOf(e: unknown): string {
  if (e instanceof GitCommandError) return e.message.split("\n").slice(0, 4).join(" | ");
  return e instanceof Error ? e.message : String(e);
}

/** The report as lines for a human. */
export function formatSoak(r: SoakReport): string {
  const kinds = SOAK_KINDS.map((k) => `${k} ${r.byKind[k]}`).join(", ");
  return [
    `clones: ${r.clones} (${kinds})`,
    `failures: ${r.failures.length}`,
    ...r.failures.map((f) => `  #${f.index} ${f.kind} attempt ${f.attempt}: ${f.message}`),
    `cut by the restart (retried): ${r.cutByRestart.length}`,
    ...r.cutByRestart.map((f) => `  #${f.index} ${f.kind}: ${f.message}`),
    `fsck --full clean: ${r.fsckChecked} of ${r.fsckChecked} finished clones (all checked)`,
    `pushes at the origin: ${r.pushes}; edge restarts: ${r.restarts}`,
    `origin requests: ${r.originRequests} (upload-pack fetch commands: ${r.originFetches})`,
    `wall time: ${(r.wallMs / 1000).toFixed(1)} s`,
  ].join("\n");
}
