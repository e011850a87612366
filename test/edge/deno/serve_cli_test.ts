/**
 * `gitedge serve`'s command line, generated from the settings table: flags in both spellings,
 * GITEDGE_* variables under the flags, its wording of bad values, and `--help` (from a real
 * process) listing every setting `gitedge serve` takes.
 */
import { assert, assertEquals, assertMatch, assertThrows } from "../../support/assert.ts";
import { parseServeArgs, ServeUsageError } from "../../../edge/deno/serve_cli.ts";
import { envNameOf, type Setting, SETTINGS } from "../../../src/proxy/settings/table.ts";
import { type ServeSettings, SettingError } from "../../../src/proxy/settings/resolve.ts";

const CLI = new URL("../../../edge/deno/cli.ts", import.meta.url).pathname;
const noEnv = () => undefined;

Deno.test("gitedge serve words malformed flags as before, naming the flag", () => {
  const message = (args: string[]) =>
    assertThrows(() => parseServeArgs(args, noEnv), SettingError).message;
  assertEquals(message(["--origin", "x", "--chunks", "0"]), "--origin needs a URL, got 'x'");
  assertEquals(
    message(["--origin=http://o", "--url-ttl", "59"]),
    "--url-ttl needs an integer >= 60, got '59'",
  );
  assertEquals(
    message(["--public-url", "ftp://p", "--origin", "http://o"]),
    "--public-url needs an http(s) URL, got 'ftp://p'",
  );
  assertEquals(
    message(["--port", "0"]),
    "set --origin URL or GITEDGE_ORIGIN (single origin) or --allow-host HOST or GITEDGE_ALLOW_HOSTS (multi-origin)",
  );
  assertEquals(
    message(["--origin", "http://o", "--port", ""]),
    "--port needs an integer >= 0, got ''",
  );
  const usage = (args: string[]) =>
    assertThrows(() => parseServeArgs(args, noEnv), ServeUsageError).message;
  assertEquals(usage(["--origin", "http://o", "--frobnicate"]), "unknown option '--frobnicate'");
  assertEquals(usage(["--origin"]), "--origin needs a value");
  assertEquals(usage(["http://o"]), "unknown option 'http://o'");
});

Deno.test("gitedge serve: flags in both spellings, repeated lists, every value into its place", () => {
  const settings = parseServeArgs([
    "--allow-host",
    "A.example",
    "--allow-host=b.example",
    "--port=0",
    "--host",
    "::1",
    "--store",
    "/tmp/s",
    "--chunks",
    "2",
    "--public-url",
    "https://edge.example/",
    "--url-ttl=600",
    "--max-request-bytes",
    "2048",
    "--body-timeout",
    "5",
    "--build-backoff",
    "0",
    "--auth-ttl",
    "0",
    "--response-cache-bytes",
    "0",
    "--snapshot-plain-clones",
    "off",
    "--admin-token",
    "tok",
    "--max-connections",
    "64",
    "--header-timeout",
    "5",
    "--idle-timeout=7",
    "--ls-refs-ahead",
    "3",
    "--store-max-bytes",
    "1000000",
  ], noEnv);
  assertEquals(settings, {
    config: {
      allowHosts: ["a.example", "b.example"],
      publicUrl: "https://edge.example",
      chunks: 2,
      urlTtlSeconds: 600,
      maxRequestBytes: 2048,
      bodyTimeoutSeconds: 5,
      buildBackoffSeconds: 0,
      authTtlSeconds: 0,
      responseCacheBytes: 0,
      snapshotPlainClones: false,
      lsRefsAheadSeconds: 3,
      storeMaxBytes: 1_000_000,
      adminToken: "tok",
    },
    port: 0,
    host: "::1",
    store: "/tmp/s",
    maxConnections: 64,
    headerTimeoutSeconds: 5,
    idleTimeoutSeconds: 7,
    drainTimeoutSeconds: 30,
    logLevel: "info",
    mirror: true,
    mirrorMaxBytes: 0,
  });
});

Deno.test("gitedge serve: GITEDGE_ADMIN_TOKEN and GITEDGE_SIGNING_KEY as before; a flag wins", () => {
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  const key = "ab".repeat(16);
  const fromEnv = parseServeArgs(
    ["--origin", "http://o"],
    env({ GITEDGE_ADMIN_TOKEN: "t1", GITEDGE_SIGNING_KEY: key }),
  );
  assertEquals(fromEnv.config.adminToken, "t1");
  assertEquals(fromEnv.signingKey, new Uint8Array(16).fill(0xab));
  const flag = parseServeArgs(
    ["--origin", "http://o", "--admin-token", "t2"],
    env({ GITEDGE_ADMIN_TOKEN: "t1" }),
  );
  assertEquals(flag.config.adminToken, "t2");
  const blank = parseServeArgs(["--origin", "http://o"], env({ GITEDGE_SIGNING_KEY: "" }));
  assertEquals([blank.signingKey, blank.config.adminToken], [undefined, undefined]);
  const bad = assertThrows(
    () => parseServeArgs(["--origin", "http://o"], env({ GITEDGE_SIGNING_KEY: "secret-ish" })),
    SettingError,
  );
  assertEquals(bad.message, "GITEDGE_SIGNING_KEY must be at least 32 hex digits");
});

async function serve(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", CLI, "serve", ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

Deno.test("gitedge serve --help lists every setting it takes; a bad value exits 2 with its line and a hint", async () => {
  const help = await serve(["--help"]);
  assertEquals(help.code, 0, help.stderr);
  const takes = SETTINGS.filter((s) => s.flag !== undefined || s.env !== undefined);
  assert(takes.length >= 14, `${takes.length} settings`);
  for (const s of takes) {
    for (const name of [s.flag, s.env]) {
      if (name !== undefined) assertMatch(help.stdout, new RegExp(`^  ${name}\\b`, "m"), name);
    }
    if (s.default !== undefined && s.flag !== undefined) {
      assert(help.stdout.includes(`Default: ${s.default}`), `${s.key}'s default in --help`);
    }
  }
  for (const s of SETTINGS.filter((s) => s.flag === undefined && s.env === undefined)) {
    assert(!help.stdout.includes(s.workerVar!), `${s.workerVar} is the Worker's only`);
  }
  const bad = await serve(["--origin", "http://127.0.0.1:9", "--chunks", "0"]);
  assertEquals(bad.code, 2, bad.stderr);
  // The one line, and a hint: not the whole usage after it.
  assertEquals(
    bad.stderr,
    "gitedge serve: --chunks needs an integer >= 1, got '0'\nsee 'gitedge serve --help'\n",
  );
});

/** Two valid texts for `s` (a list: the first with two items) and the values they resolve to. */
function samplesOf(
  s: Setting,
): [{ text: string; value: unknown }, { text: string; value: unknown }] {
  if (s.list) {
    return [{ text: "a.example, B.example", value: ["a.example", "b.example"] }, {
      text: "c.example",
      value: ["c.example"],
    }];
  }
  if (s.min !== undefined) {
    return [{ text: String(s.min + 7), value: s.min + 7 }, {
      text: String(s.min + 3),
      value: s.min + 3,
    }];
  }
  if (s.key === "signingKey") {
    const one = { text: "cd".repeat(16), value: new Uint8Array(16).fill(0xcd) };
    return [one, one];
  }
  // Otherwise the first two of these texts the setting takes.
  const texts = [
    "on",
    "off",
    "json",
    "text",
    "debug",
    "warn",
    "http://a.example/p/",
    "http://b",
    "redis://a.example:6379",
    "rediss://b.example",
  ];
  const taken = texts.flatMap((text) => {
    try {
      return [{ text, value: s.parse(text) }];
    } catch {
      return [];
    }
  });
  assert(taken.length >= 2, `a sample for ${s.key}`);
  return [taken[0], taken[1]];
}

Deno.test("gitedge serve reads every setting it takes from GITEDGE_<NAME>, and the flag wins", () => {
  const serveRows = SETTINGS.filter((s) => s.flag !== undefined || s.env !== undefined);
  assert(serveRows.length >= 18, `${serveRows.length} settings`);
  for (const s of SETTINGS.filter((s) => s.flag !== undefined)) {
    assertEquals(s.env, envNameOf(s.key), `${s.key} has its variable`);
  }
  const valueOf = (settings: ServeSettings, s: Setting) =>
    s.edge
      ? (settings.config as unknown as Record<string, unknown>)[s.key]
      : (settings as unknown as Record<string, unknown>)[s.key];
  for (const s of serveRows) {
    const [envSample, flagSample] = samplesOf(s);
    // A single origin by flag, unless this row is one of the two modes.
    const base = s.key === "origin" || s.key === "allowHosts" ? [] : ["--origin", "http://o"];
    const vars = (name: string) => name === s.env ? envSample.text : undefined;
    assertEquals(valueOf(parseServeArgs(base, vars), s), envSample.value, `${s.env} sets ${s.key}`);
    if (s.flag === undefined) continue;
    const both = parseServeArgs([...base, s.flag, flagSample.text], vars);
    assertEquals(valueOf(both, s), flagSample.value, `${s.flag} wins over ${s.env}`);
  }
  // A flag of either mode sets aside both modes' variables; with none, the message names both.
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  const multi = parseServeArgs(["--allow-host", "h.example"], env({ GITEDGE_ORIGIN: "http://o" }));
  assertEquals([multi.config.origin, multi.config.allowHosts], [undefined, ["h.example"]]);
  assertEquals(
    assertThrows(() => parseServeArgs([], noEnv), SettingError).message,
    "set --origin URL or GITEDGE_ORIGIN (single origin) or --allow-host HOST or GITEDGE_ALLOW_HOSTS (multi-origin)",
  );
  assertEquals(
    assertThrows(
      () => parseServeArgs([], env({ GITEDGE_ORIGIN: "http://o", GITEDGE_CHUNKS: "0" })),
      SettingError,
    ).message,
    "GITEDGE_CHUNKS must be an integer >= 1, got '0'",
  );
});
