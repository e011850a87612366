#!/usr/bin/env node
// The `gitedge` bin of the npm package: runs the bundled CLI (dist/entry.js) on the Deno binary
// that the `deno` dependency installed. Signals are passed on and the exit status is the CLI's
// own, a signal death included (so a cancelled CI job sees 130 / 143 as from the CLI itself).
"use strict";
const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

// The binary itself, not the `deno` package's own Node wrapper (one process fewer on each start):
// its postinstall places it beside package.json; without install scripts, its API finds it.
function denoBinary() {
  if (process.env.GITEDGE_DENO) return process.env.GITEDGE_DENO;
  const dir = path.dirname(require.resolve("deno/package.json"));
  const exe = path.join(
    dir,
    process.platform === "win32" ? "deno.exe" : "deno",
  );
  return fs.existsSync(exe) ? exe : require("deno/install_api.cjs").runInstall();
}

const entry = path.join(__dirname, "dist", "entry.js");
const child = spawn(
  denoBinary(),
  [
    "run",
    "--allow-all",
    "--no-config",
    "--quiet",
    entry,
    ...process.argv.slice(2),
  ],
  { stdio: "inherit", env: { DENO_NO_UPDATE_CHECK: "1", ...process.env } },
);
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (child.exitCode === null) child.kill(signal);
  });
}
child.on("error", (err) => {
  console.error(`gitedge: cannot start Deno: ${err.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
