/**
 * `gitedge clone` stopped by SIGTERM (a cancelled CI job, `docker stop`) or SIGINT (Ctrl-C) while
 * packs download and while index-pack runs: it stops every child process, removes the directory it
 * created and exits 143 / 130; the same clone then runs again.
 */
import { assert, assertEquals } from "../support/assert.ts";
import { git, GIT_ENV, tempDir } from "../support/git.ts";
import { startOrigin } from "../support/origin.ts";
import { makeRepo } from "../support/fixtures.ts";
import { startDenoEdge } from "../../edge/deno/server.ts";
import { warm } from "../proxy/edge_suite.ts";
import { startRelay } from "../support/relay.ts";
import { withinDeadline } from "../support/deadline.ts";
import { runCloneCli } from "../support/cli_process.ts";

const CLI = new URL("../../edge/deno/cli.ts", import.meta.url).pathname;

/** A process as /proc shows it. */
interface Proc {
  pid: number;
  ppid: number;
  state: string;
  cmdline: string;
}

function readProc(pid: number): Proc | null {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    // "pid (comm) state ppid ...": comm may hold spaces, so split after its closing parenthesis.
    const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const cmdline = Deno.readTextFileSync(`/proc/${pid}/cmdline`).replaceAll("\0", " ");
    return { pid, ppid: Number(ppid), state, cmdline };
  } catch {
    return null; // gone meanwhile
  }
}

/** Every live descendant of `root`. */
function descendants(root: number): Proc[] {
  const all: Proc[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    const proc = readProc(Number(entry.name));
    if (proc) all.push(proc);
  }
  const found: Proc[] = [];
  const parents = new Set([root]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of all) {
      if (parents.has(p.ppid) && !parents.has(p.pid)) {
        parents.add(p.pid);
        found.push(p);
        grew = true;
      }
    }
  }
  return found;
}

/** Still running (a zombie has ended; it only waits to be reaped). */
function running(pid: number): boolean {
  const proc = readProc(pid);
  return proc !== null && proc.state !== "Z";
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

async function pollUntil<T>(what: string, probe: () => T | null | Promise<T | null>): Promise<T> {
  return await withinDeadline(
    (async () => {
      for (;;) {
        const value = await probe();
        if (value !== null) return value;
        await new Promise((r) => setTimeout(r, 5));
      }
    })(),
    what,
  );
}

Deno.test("gitedge clone stopped by SIGTERM or SIGINT mid-download and mid-index leaves nothing, exits 143 / 130, and runs again", async (t) => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 6, binaryBytes: 3 << 20 });
  await using dir = await tempDir();
  // Packs by URI come through a relay capped at 512 KiB/s per response: seconds per pack.
  let edgeUrl = "";
  await using relay = await startRelay(() => edgeUrl, { bytesPerSecond: 512 << 10 });
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url, chunks: 3, publicUrl: relay.url },
  });
  edgeUrl = edge.url;
  await warm(edge, "r.git");
  const url = `${edge.url}/r.git`;

  const cases = [
    { signal: "SIGTERM", code: 143, phase: "download" },
    { signal: "SIGINT", code: 130, phase: "download" },
    { signal: "SIGTERM", code: 143, phase: "index" },
    { signal: "SIGINT", code: 130, phase: "index" },
  ] as const;
  for (const c of cases) {
    await t.step(`${c.signal} mid-${c.phase}`, async () => {
      const target = `out-${c.signal}-${c.phase}`;
      // Streamed: index-pack runs while each pack downloads. Spooled: it runs once one is in.
      const spool = c.phase === "download" ? "never" : "always";
      const child = new Deno.Command(Deno.execPath(), {
        // Mid-index: one pack at a time, so each index-pack runs while the next pack downloads.
        args: [
          "run",
          "--allow-all",
          CLI,
          "clone",
          "--spool",
          spool,
          "--jobs",
          c.phase === "download" ? "3" : "1",
          url,
          target,
        ],
        cwd: dir.path,
        env: GIT_ENV,
        stdout: "null",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();
      const indexPacks = () =>
        descendants(child.pid).filter((p) => p.cmdline.includes("index-pack"));
      let exited = false;
      child.status.then(() => (exited = true));
      const seen = await pollUntil(`index-pack under the clone (${c.phase})`, async () => {
        if (exited) throw new Error(`the clone ended before the signal: ${await stderr}`);
        const procs = indexPacks();
        if (c.phase === "download") {
          // Every pack is downloading into its index-pack, and bytes have landed.
          const staged = await Array.fromAsync(
            Deno.readDir(`${dir.path}/${target}/.git/objects/pack`),
          ).catch(() => []);
          return procs.length >= 3 && staged.some((e) => e.name.startsWith("tmp_gitedge_"))
            ? procs
            : null;
        }
        // A spooled pack's index-pack reads its file (the inline pack's reads stdin). Frozen, it
        // stays mid-index until the clone stops it; one that ended first is not the one.
        const indexing = procs.find((p) => !p.cmdline.includes("--stdin"));
        if (!indexing) return null;
        try {
          Deno.kill(indexing.pid, "SIGSTOP");
        } catch {
          return null;
        }
        return procs;
      });
      // Mid-index for sure: the first index-pack is frozen until the clone stops it.
      Deno.kill(child.pid, c.signal);
      try {
        const status = await withinDeadline(child.status, `the clone's exit after ${c.signal}`);
        const err = await stderr;
        assertEquals(status.code, c.code, err);
        for (const p of seen) {
          assert(!running(p.pid), `index-pack ${p.pid} still runs: ${p.cmdline}`);
        }
        assertEquals(descendants(child.pid).filter((p) => p.state !== "Z"), []);
        assert(!(await exists(`${dir.path}/${target}`)), `${target} was left behind`);
      } finally {
        // Orphans of a failed run (a frozen one would never end) go with the test.
        for (const p of seen) if (running(p.pid)) Deno.kill(p.pid, "SIGKILL");
      }

      const again = await runCloneCli(["-q", url, target], dir.path);
      assertEquals(again.code, 0, again.stderr);
    });
  }
});

Deno.test("gitedge fetch stopped by SIGTERM mid-download ends git, leaves no temporary pack, exits 143, and runs again", async () => {
  await using origin = await startOrigin();
  await makeRepo(origin, "r.git", { commits: 6, binaryBytes: 2 << 20 });
  await using dir = await tempDir();
  await using edge = await startDenoEdge({
    store: `${dir.path}/store`,
    config: { origin: origin.url },
  });
  // The workspace fetches through a relay capped at 256 KiB/s: seconds for the history.
  await using relay = await startRelay(edge.url, { bytesPerSecond: 256 << 10 });
  // A persistent workspace's first fetch: an empty repository with its remote.
  const work = `${dir.path}/work`;
  await git(["init", "-q", work]);
  await git(["remote", "add", "origin", `${relay.url}/r.git`], { cwd: work });

  const fetch = () =>
    new Deno.Command(Deno.execPath(), {
      args: ["run", "--allow-all", CLI, "fetch", "-q", "origin"],
      cwd: work,
      env: GIT_ENV,
      stdout: "null",
      stderr: "piped",
    }).spawn();
  const child = fetch();
  const stderr = new Response(child.stderr).text();
  const packDir = `${work}/.git/objects/pack`;
  let exited = false;
  child.status.then(() => (exited = true));
  const seen = await pollUntil("git fetch receiving its pack", async () => {
    if (exited) throw new Error(`gitedge fetch ended before the signal: ${await stderr}`);
    // The pack is arriving: git's index-pack (or, for few objects, unpack-objects) runs.
    const procs = descendants(child.pid);
    return procs.some((p) => /index-pack|unpack-objects/.test(p.cmdline)) ? procs : null;
  });
  Deno.kill(child.pid, "SIGTERM");
  try {
    const status = await withinDeadline(child.status, "gitedge fetch's exit after SIGTERM");
    assertEquals(status.code, 143, await stderr);
    // git's own helper (remote-http) ends once it notices git is gone (its next write to git's
    // pipe): under load that can be just after gitedge exits, so each gets a few seconds.
    const until = Date.now() + 5_000;
    while (seen.some((p) => running(p.pid)) && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
    }
    for (const p of seen) assert(!running(p.pid), `${p.pid} still runs: ${p.cmdline}`);
    const left = (await Array.fromAsync(Deno.readDir(packDir))).map((e) => e.name);
    assertEquals(left.filter((name) => name.startsWith("tmp_")), [], "temporary packs");
  } finally {
    for (const p of seen) if (running(p.pid)) Deno.kill(p.pid, "SIGKILL");
  }
  const again = fetch();
  const againErr = new Response(again.stderr).text();
  const status = await withinDeadline(again.status, "the second fetch");
  assertEquals(status.code, 0, await againErr);
  assertEquals(
    await git(["rev-parse", "refs/remotes/origin/main"], { cwd: work }),
    await git(["rev-parse", "refs/heads/main"], { cwd: `${origin.root}/r.git` }),
  );
  await git(["fsck", "--full", "--no-progress"], { cwd: work });
});
