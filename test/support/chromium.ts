/**
 * Debian's headless chromium, for tests of HTML the edge serves: `chromiumMissing()` says why it
 * cannot run (then the test is ignored, with that reason printed), `dumpDom(url)` is the DOM after
 * the page loaded, `screenshot(url, png)` writes a PNG. Each run is bounded (`withinDeadline`)
 * and killed when it overruns.
 */
import { withinDeadline } from "./deadline.ts";

const BIN = Deno.env.get("GITEDGE_CHROMIUM") ?? "chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--hide-scrollbars",
];

/** Why chromium cannot run here, or null when it can. */
export async function chromiumMissing(): Promise<string | null> {
  try {
    const out = await new Deno.Command(BIN, {
      args: ["--version"],
      stdout: "piped",
      stderr: "piped",
    })
      .output();
    return out.success ? null : `${BIN} --version failed`;
  } catch (error) {
    return error instanceof Deno.errors.NotFound
      ? `${BIN} is not installed (apt-get install chromium)`
      : `${BIN} does not run: ${error}`;
  }
}

async function run(args: string[], what: string): Promise<string> {
  // Its own profile directory, so parallel runs do not share one.
  const profile = await Deno.makeTempDir({ prefix: "gitedge-chromium-" });
  const child = new Deno.Command(BIN, {
    args: [...FLAGS, `--user-data-dir=${profile}`, ...args],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  try {
    const out = await withinDeadline(child.output(), what, 90_000);
    const stdout = new TextDecoder().decode(out.stdout);
    if (!out.success) {
      throw new Error(`${what} failed: ${new TextDecoder().decode(out.stderr).slice(-2000)}`);
    }
    return stdout;
  } catch (error) {
    try {
      child.kill("SIGKILL");
    } catch { /* already ended */ }
    await child.status.catch(() => {});
    throw error;
  } finally {
    await Deno.remove(profile, { recursive: true }).catch(() => {});
  }
}

/** The serialized DOM of `url` once loaded. */
export function dumpDom(url: string): Promise<string> {
  return run(["--dump-dom", url], `chromium --dump-dom ${url}`);
}

/** Writes a PNG of `url` (a `width`x`height` window) to `png`. */
export async function screenshot(
  url: string,
  png: string,
  size = { width: 1400, height: 900 },
): Promise<void> {
  await run(
    [`--screenshot=${png}`, `--window-size=${size.width},${size.height}`, url],
    `chromium --screenshot ${url}`,
  );
}
