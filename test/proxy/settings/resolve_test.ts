/**
 * The settings table and its one validation: the value parsers, each settings source's names in messages
 * (flags, Worker vars, code), secrets never quoted, the rules between settings, and the table
 * agreeing with itself, with `DEFAULT_EDGE_CONFIG` and with wrangler.toml.
 */
import { assert, assertEquals, assertThrows } from "../../support/assert.ts";
import {
  checkEdgeConfig,
  type GivenSetting,
  resolveSettings,
  SettingError,
} from "../../../src/proxy/settings/resolve.ts";
import {
  ConfigValueError,
  parseHttpUrl,
  parseIntAtLeast,
  parseSigningKeyHex,
} from "../../../src/proxy/settings/parsers.ts";
import {
  DEFAULT_CONNECTION_LIMITS,
  DEFAULT_R2_PART_MIB,
  SETTINGS,
  type SettingsSource,
} from "../../../src/proxy/settings/table.ts";
import { DEFAULT_EDGE_CONFIG } from "../../../src/proxy/core/config.ts";

Deno.test("parseIntAtLeast takes safe integers from the minimum up", () => {
  assertEquals(parseIntAtLeast("60", 60), 60);
  assertEquals(parseIntAtLeast("0", 0), 0);
  for (const text of ["59", "1.5", "ten", "", "9007199254740993"]) {
    const e = assertThrows(() => parseIntAtLeast(text, 60), ConfigValueError);
    assertEquals([e.expected, e.value], ["an integer >= 60", text]);
  }
  for (const blank of ["", " "]) {
    const e = assertThrows(() => parseIntAtLeast(blank, 0), ConfigValueError);
    assertEquals(e.expected, "an integer >= 0");
  }
});

Deno.test("parseHttpUrl accepts http(s) URLs and drops trailing slashes", () => {
  assertEquals(parseHttpUrl("https://git.example/base//"), "https://git.example/base");
  assertEquals(parseHttpUrl("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
  assertEquals(assertThrows(() => parseHttpUrl("not a url"), ConfigValueError).expected, "a URL");
  assertEquals(
    assertThrows(() => parseHttpUrl("ftp://git.example"), ConfigValueError).expected,
    "an http(s) URL",
  );
});

Deno.test("parseSigningKeyHex decodes 16 bytes or more and never quotes the key", () => {
  const hex = "00ff10AB".repeat(4);
  assertEquals(
    parseSigningKeyHex(hex),
    Uint8Array.from([0, 255, 16, 171, 0, 255, 16, 171, 0, 255, 16, 171, 0, 255, 16, 171]),
  );
  for (const bad of ["00ff".repeat(7), `${"ab".repeat(16)}c`, "zz".repeat(16)]) {
    const e = assertThrows(() => parseSigningKeyHex(bad), ConfigValueError);
    assertEquals(e.message, "expected at least 32 hex digits");
  }
});

const KEY_HEX = "00112233445566778899aabbccddeeff";

function given(entries: [GivenSetting["key"], string, string][]): GivenSetting[] {
  return entries.map(([key, source, text]) => ({ key, source, text }));
}

Deno.test("the table: one entry per name, flag, variable; every entry reachable; defaults within bounds", () => {
  for (const field of ["key", "flag", "env", "workerVar"] as const) {
    const names = SETTINGS.map((s) => s[field]).filter((n) => n !== undefined);
    assertEquals(new Set(names).size, names.length, `${field}s are unique`);
  }
  for (const s of SETTINGS) {
    assert(s.flag || s.env || s.workerVar, `${s.key} can be set somewhere`);
    assert(s.help.endsWith("."), `${s.key}'s help is a sentence`);
    if (s.min !== undefined && s.default !== undefined) {
      assert(typeof s.default === "number" && s.default >= s.min, `${s.key}: default >= min`);
      assertEquals(s.parse(String(s.default)), s.default, `${s.key}'s default parses as itself`);
    }
  }
  for (const [key, value] of Object.entries(DEFAULT_EDGE_CONFIG)) {
    assertEquals(SETTINGS.find((s) => s.key === key)?.default, value, `${key}'s default`);
  }
});

Deno.test("resolveSettings: defaults per settings source, the edge's settings in config, the rest beside it", () => {
  const serve = resolveSettings("serve", given([["origin", "--origin", "https://o/"]]));
  assertEquals(serve, {
    config: { origin: "https://o", ...DEFAULT_EDGE_CONFIG },
    port: 8080,
    host: "127.0.0.1",
    store: ".gitedge-store",
    ...DEFAULT_CONNECTION_LIMITS,
    drainTimeoutSeconds: 30,
    logLevel: "info",
    mirror: true,
    mirrorMaxBytes: 0,
  });
  const worker = resolveSettings(
    "worker",
    given([
      ["allowHosts", "ALLOW_HOSTS", "A.example"],
      ["signingKey", "EDGE_SIGNING_KEY", KEY_HEX],
      [
        "allowHosts",
        "ALLOW_HOSTS",
        "b.example",
      ],
    ]),
  );
  assertEquals(worker.config, { allowHosts: ["a.example", "b.example"], ...DEFAULT_EDGE_CONFIG });
  assertEquals([worker.signingKey.byteLength, worker.r2PartMiB, worker.refreshSeconds], [
    16,
    DEFAULT_R2_PART_MIB,
    undefined,
  ]);
  const later = resolveSettings(
    "serve",
    given([["origin", "--origin", "https://a"], ["chunks", "--chunks", "2"], [
      "chunks",
      "--chunks",
      "7",
    ]]),
  );
  assertEquals(later.config.chunks, 7, "a later value replaces an earlier one");
});

Deno.test("resolveSettings: one error naming the setting as each settings source spells it, secrets unquoted", () => {
  const cases: [SettingsSource, [GivenSetting["key"], string, string][], string][] = [
    [
      "serve",
      [],
      "set --origin URL or GITEDGE_ORIGIN (single origin) or --allow-host HOST or GITEDGE_ALLOW_HOSTS (multi-origin)",
    ],
    [
      "worker",
      [["signingKey", "EDGE_SIGNING_KEY", KEY_HEX]],
      "set ORIGIN (single origin) or ALLOW_HOSTS (multi-origin)",
    ],
    ["config", [], "set origin (single origin) or allowHosts (multi-origin)"],
    [
      "serve",
      [["origin", "--origin", "https://a"], ["allowHosts", "--allow-host", "b"]],
      "--origin URL and --allow-host HOST are exclusive: set only one",
    ],
    [
      "worker",
      [["origin", "ORIGIN", "https://a"]],
      "EDGE_SIGNING_KEY is not set (openssl rand -hex 32 | wrangler secret put EDGE_SIGNING_KEY; " +
      "for wrangler dev, EDGE_SIGNING_KEY=<hex> in .dev.vars)",
    ],
    ["serve", [["chunks", "--chunks", "0"]], "--chunks needs an integer >= 1, got '0'"],
    ["worker", [["chunks", "CHUNKS", "x"]], "CHUNKS must be an integer >= 1, got 'x'"],
    [
      "worker",
      [["multiOriginScheme", "MULTI_ORIGIN_SCHEME", "ftp"]],
      "MULTI_ORIGIN_SCHEME must be https or http, got 'ftp'",
    ],
    [
      "serve",
      [["signingKey", "GITEDGE_SIGNING_KEY", "abcd"]],
      "GITEDGE_SIGNING_KEY must be at least 32 hex digits",
    ],
    ["worker", [["r2PartMiB", "R2_PART_MIB", "4"]], "R2_PART_MIB must be an integer >= 5, got '4'"],
    ["serve", [["r2PartMiB", "R2_PART_MIB", "8"]], "R2_PART_MIB is not a setting here"],
    ["config", [["port", "port", "8"]], "port is not a setting here"],
  ];
  for (const [from, entries, message] of cases) {
    const error = assertThrows(
      () => resolveSettings(from as "serve", given(entries)),
      SettingError,
    );
    assertEquals(error.message, message);
  }
  const credentials = assertThrows(
    () => resolveSettings("serve", given([["origin", "--origin", "https://al:s3cret@o"]])),
    SettingError,
  );
  assert(!credentials.message.includes("s3cret"), credentials.message);
  assertEquals(credentials.setting, "origin");
});

Deno.test("checkEdgeConfig: a config given in code passes the same checks and gets the defaults", () => {
  assertEquals(checkEdgeConfig({ origin: "https://o/", chunks: 2, multiOriginScheme: undefined }), {
    ...DEFAULT_EDGE_CONFIG,
    origin: "https://o",
    chunks: 2,
  });
  assertEquals(checkEdgeConfig({ allowHosts: ["h"], adminToken: "" }).adminToken, "");
  assertEquals(
    assertThrows(() => checkEdgeConfig({ origin: "https://o", urlTtlSeconds: 5 }), SettingError)
      .message,
    "urlTtlSeconds must be an integer >= 60, got '5'",
  );
  assertThrows(() => checkEdgeConfig({ allowHosts: [] }), SettingError, "set origin");
});

Deno.test("wrangler.toml sets only Worker vars of the table", async () => {
  const toml = await Deno.readTextFile(new URL("../../../wrangler.toml", import.meta.url));
  const vars = toml.slice(toml.indexOf("[vars]"), toml.indexOf("\n[[", toml.indexOf("[vars]")));
  const names = [...vars.matchAll(/^#?\s*([A-Z][A-Z0-9_]+)\s*=/gm)].map((m) => m[1]);
  assert(names.includes("ORIGIN") && names.includes("R2_PART_MIB"), names.join());
  const known = new Set(SETTINGS.map((s) => s.workerVar));
  assertEquals(names.filter((name) => !known.has(name)), []);
});
