/**
 * The local Workers path of docs/workers.md under load: `wrangler dev` (the version deno.json pins) in front
 * of a local `git http-backend` origin, warming a repository, then stock git cloning it by URI.
 * While it warms, wrangler's processes are sampled from outside every `--sample-ms`: descriptors and
 * RSS of its node process and both workerd processes, and the TCP connections from workerd to
 * node's loopback listeners, by state.
 *
 *   deno run -A bench/wrangler_dev.ts [--repo small|git|big] [--mode task|cli|both]
 *                                     [--sample-ms N] [--warm-timeout-s N] [--no-clone]
 *
 * `--mode task` (default): `deno task worker:dev`, the command of docs/workers.md. `--mode cli`: the bare
 * `npx wrangler@<pin> dev`, whose DevTools inspector proxy turns every few KiB of an outgoing
 * fetch body into a request to node (see test/support/wrangler_dev.ts). `both`: cli, then
 * task, each against a fresh state.
 *
 * `--control`: first, the bare CLI runs the control Worker without gitedge code
 * (bench/r2_control_worker.ts) and makes the build's binding calls one kind per request: the
 * origin's pack read through `fetch` (git http-backend's dumb path), the same bytes written to
 * local R2 as segments, read back into multipart packs, then deleted. The connections to node
 * after each step tell which call costs them.
 *
 * `--repo small`: a generated 8 MiB repository. `git`: git's history to v2.0.0 (165k objects,
 * 54 MB), from $GITEDGE_GIT_BUNDLE (default /work/shared/data/…). `big`: the generated git.git-class
 * repository (849k objects, 682 MB pack; the first run generates it into the fixture cache).
 * Writes bench/out/wrangler_dev.json, and wrangler's output to bench/out/wrangler_dev_<mode>.log
 * (without its "Too many open files" lines, which are counted).
 */
import {
  startWranglerDev,
  type WranglerDevMode,
  type WranglerDevSample,
} from "../test/support/wrangler_dev.ts";
import { makeBigRepo } from "../test/support/big_repo.ts";
import { assertSameClone, makeRepo } from "../test/support/fixtures.ts";
import { git, tempDir } from "../test/support/git.ts";
import { startOrigin } from "../test/support/origin.ts";
import { bareFromBundle, flags, loadavg, packStats, printResult } from "./harness/mod.ts";

const REPO = flags.string("repo", "small");
const MODE = flags.string("mode", "task");
const SAMPLE_MS = flags.number("sample-ms", 1000);
const WARM_TIMEOUT_S = flags.number("warm-timeout-s", 1800);
const CLONE = !flags.has("no-clone");
const CONTROL = flags.has("control");
const modes: WranglerDevMode[] = MODE === "both" ? ["cli", "task"] : [MODE as WranglerDevMode];

await using origin = await startOrigin();
await using work = await tempDir("gitedge-wrangler-");
if (REPO === "git") {
  await bareFromBundle(`${origin.root}/repo.git`);
} else if (REPO === "big") {
  console.log("git.git-sized repository from the fixture cache (first run: generating)…");
  await makeBigRepo(origin, "repo.git");
} else {
  await makeRepo(origin, "repo.git", { commits: 40, targetBytes: 8 << 20, seed: 21 });
}
const { objects, packMB } = await packStats(`${origin.root}/repo.git`);
console.log(`repository: ${objects} objects, ${packMB.toFixed(0)} MB of packs`);
const direct = `${work.path}/direct`;
if (CLONE) await git(["clone", "-q", "--mirror", origin.repoUrl("repo.git"), direct]);

/** The control Worker under the bare CLI: the most connections to node one call of each kind added. */
async function control(): Promise<Record<string, number>> {
  const dir = `${work.path}/control`;
  await Deno.mkdir(dir);
  await using dev = await startWranglerDev({
    mode: "cli",
    origin: origin.url,
    dir,
    entry: "bench/r2_control_worker.ts",
  });
  const peaks: Record<string, number> = {};
  let peak = 0;
  const timer = setInterval(() => {
    dev.sample().then((s) => peak = Math.max(peak, s.toNodeTotal), () => {});
  }, SAMPLE_MS);
  const step = async (name: string, path: string) => {
    const before = (await dev.sample()).toNodeTotal;
    peak = before;
    const t0 = performance.now();
    const res = await fetch(`${dev.url}${path}`, { method: "POST" });
    const text = await res.text();
    if (!res.ok) throw new Error(`control ${path} failed (${res.status}): ${text}`);
    await new Promise((r) => setTimeout(r, SAMPLE_MS));
    const after = Math.max(peak, (await dev.sample()).toNodeTotal);
    peaks[name] = Math.max(peaks[name] ?? 0, after - before);
    console.log(
      `  control ${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s, connections to ` +
        `node ${before} before, ${after} at the most (${text.slice(0, 80)})`,
    );
  };
  try {
    console.log(`\ncontrol (no gitedge code) under wrangler ${dev.version} dev (bare CLI):`);
    const packDir = `${origin.root}/repo.git/objects/pack`;
    const packs = [...Deno.readDirSync(packDir)].filter((e) => e.name.endsWith(".pack"));
    const sizes = packs.map((e) => Deno.statSync(`${packDir}/${e.name}`).size);
    const total = sizes.reduce((a, b) => a + b, 0);
    for (const pack of packs) {
      const url = `${origin.repoUrl("repo.git")}/objects/pack/${pack.name}`;
      await step("origin fetch", `/origin?url=${encodeURIComponent(url)}`);
    }
    await step("R2 puts", `/fetch?bytes=${total}&part=${8 << 20}&objects=${objects}`);
    const quarter = Math.ceil(total / 4);
    const split = [quarter, quarter, quarter, total - 3 * quarter].join(",");
    for (let k = 0; k < 4; k++) {
      await step("R2 gets + multipart", `/split?pack=${k}&sizes=${split}`);
    }
    await step("R2 deletes", "/publish");
  } finally {
    clearInterval(timer);
  }
  return peaks;
}
const controlPeaks = CONTROL ? await control() : null;

interface Run {
  mode: WranglerDevMode;
  version: string;
  outcome: string;
  warmSeconds: number;
  cloneSeconds: number | null;
  peak: {
    toNode: number;
    toNodeByState: Record<string, number>;
    nodeFds: number;
    frontFds: number;
    workerFds: number;
    nodeRssMiB: number;
    frontRssMiB: number;
    workerRssMiB: number;
  };
  idle: WranglerDevSample;
  end: WranglerDevSample;
  tooManyOpenFiles: number;
  series: WranglerDevSample[];
}

const runs: Run[] = [];
for (const mode of modes) {
  const dir = `${work.path}/${mode}`;
  await Deno.mkdir(dir);
  await Deno.mkdir("bench/out", { recursive: true });
  // Declared before `dev`, so it closes after wrangler has stopped printing.
  using log = await Deno.open(`bench/out/wrangler_dev_${mode}.log`, {
    write: true,
    create: true,
    truncate: true,
  });
  const encoder = new TextEncoder();
  let tooManyOpenFiles = 0;
  await using dev = await startWranglerDev({
    mode,
    origin: origin.url,
    dir,
    onLine: (line) => {
      if (/too many open files/i.test(line)) tooManyOpenFiles++;
      else log.writeSync(encoder.encode(line + "\n"));
    },
  });
  console.log(
    `\n${mode}: wrangler ${dev.version} dev at ${dev.url} (node ${dev.nodePid}, ` +
      `workerd front ${dev.frontPid}, worker ${dev.workerPid})`,
  );
  await new Promise((r) => setTimeout(r, 1000));
  const idle = await dev.sample();
  const series: WranglerDevSample[] = [idle];
  const peak = {
    toNode: 0,
    toNodeByState: {} as Record<string, number>,
    nodeFds: 0,
    frontFds: 0,
    workerFds: 0,
    nodeRssMiB: 0,
    frontRssMiB: 0,
    workerRssMiB: 0,
  };
  const note = (s: WranglerDevSample) => {
    if (s.toNodeTotal > peak.toNode) {
      peak.toNode = s.toNodeTotal;
      peak.toNodeByState = s.toNode;
    }
    peak.nodeFds = Math.max(peak.nodeFds, s.node.fds);
    peak.frontFds = Math.max(peak.frontFds, s.front.fds);
    peak.workerFds = Math.max(peak.workerFds, s.worker.fds);
    peak.nodeRssMiB = Math.max(peak.nodeRssMiB, s.node.rssMiB);
    peak.frontRssMiB = Math.max(peak.frontRssMiB, s.front.rssMiB);
    peak.workerRssMiB = Math.max(peak.workerRssMiB, s.worker.rssMiB);
  };
  note(idle);
  let lastPrint = 0;
  const print = (s: WranglerDevSample) => {
    const state = Object.entries(s.toNode).map(([k, v]) => `${k} ${v}`).join(", ") || "none";
    console.log(
      `  ${(s.atMs / 1000).toFixed(0).padStart(5)} s  to node: ${
        String(s.toNodeTotal).padStart(6)
      }` +
        ` (${state})  fds node/front/worker ${s.node.fds}/${s.front.fds}/${s.worker.fds}` +
        `  RSS MiB ${s.node.rssMiB.toFixed(0)}/${s.front.rssMiB.toFixed(0)}/${
          s.worker.rssMiB.toFixed(0)
        }`,
    );
  };
  print(idle);
  const timer = setInterval(() => {
    dev.sample().then((s) => {
      series.push(s);
      note(s);
      if (s.atMs - lastPrint >= 10_000) {
        lastPrint = s.atMs;
        print(s);
      }
    }, () => {});
  }, SAMPLE_MS);
  const t0 = performance.now();
  let outcome: string;
  try {
    const res = await fetch(`${dev.url}/_edge/warm/repo.git`, {
      method: "POST",
      signal: AbortSignal.timeout(WARM_TIMEOUT_S * 1000),
    });
    const text = await res.text();
    outcome = res.ok && JSON.parse(text).snapshot?.state === "ready"
      ? "ready"
      : `failed (${res.status}): ${text.slice(0, 300)}`;
  } catch (error) {
    outcome = `failed: ${error instanceof Error ? error.message : String(error)}`;
  }
  const warmSeconds = (performance.now() - t0) / 1000;
  clearInterval(timer);
  const end = await dev.sample();
  note(end);
  print(end);
  console.log(`  warm: ${outcome.slice(0, 200)} after ${warmSeconds.toFixed(1)} s`);
  let cloneSeconds: number | null = null;
  if (CLONE && outcome === "ready") {
    const dest = `${dir}/clone`;
    const c0 = performance.now();
    const out = await new Deno.Command("git", {
      args: [
        "-c",
        "fetch.uriProtocols=http",
        "clone",
        "-q",
        "--mirror",
        `${dev.url}/repo.git`,
        dest,
      ],
      env: { GIT_TRACE: "1" },
      stdout: "null",
      stderr: "piped",
    }).output();
    const trace = new TextDecoder().decode(out.stderr);
    if (!out.success) throw new Error(`clone through wrangler dev failed:\n${trace.slice(-2000)}`);
    cloneSeconds = (performance.now() - c0) / 1000;
    const uris = trace.split("run_command: git http-fetch ").length - 1;
    if (uris === 0) throw new Error("the clone through wrangler dev fetched no pack by URI");
    await assertSameClone(direct, dest);
    console.log(
      `  stock git clone by URI (${uris} packs, ${
        cloneSeconds.toFixed(1)
      } s) equals a direct clone`,
    );
  }
  runs.push({
    mode,
    version: dev.version,
    outcome,
    warmSeconds,
    cloneSeconds,
    peak,
    idle,
    end,
    tooManyOpenFiles,
    series,
  });
}

const growth = (r: Run, k: "node" | "front" | "worker") =>
  (r.peak[`${k}RssMiB`] - r.idle[k].rssMiB).toFixed(0);
printResult({
  title: `wrangler dev warming ${objects} objects (${packMB.toFixed(0)} MB); peaks while ` +
    `warming (node / front workerd / Worker workerd); load ${loadavg()}`,
  headers: [
    "mode",
    "warm",
    "warm s",
    "connections to node",
    "fds",
    "RSS growth MiB",
    '"Too many open files" lines',
    "clone s",
  ],
  rows: runs.map((r) => [
    r.mode,
    r.outcome === "ready" ? "ready" : "FAILED",
    r.warmSeconds.toFixed(0),
    r.peak.toNode,
    `${r.peak.nodeFds} / ${r.peak.frontFds} / ${r.peak.workerFds}`,
    `${growth(r, "node")} / ${growth(r, "front")} / ${growth(r, "worker")}`,
    r.tooManyOpenFiles,
    r.cloneSeconds?.toFixed(0),
  ]),
  ratios: [
    ...runs.map((r) =>
      `${r.mode}: connections to node by state at the peak: ${
        Object.entries(r.peak.toNodeByState).map(([k, v]) => `${k} ${v}`).join(", ") || "none"
      }`
    ),
    ...(controlPeaks
      ? [
        `control (bare CLI, no gitedge code), connections to node added by one call of each ` +
        `kind: ${Object.entries(controlPeaks).map(([k, v]) => `${k} ${v}`).join(", ")}`,
      ]
      : []),
  ],
});
await Deno.mkdir("bench/out", { recursive: true });
await Deno.writeTextFile(
  "bench/out/wrangler_dev.json",
  JSON.stringify({ repo: REPO, objects, packMB, control: controlPeaks, runs }, null, 2) + "\n",
);
