import { assertEquals, assertThrows } from "../../support/assert.ts";
import { type Env, workerSettings } from "../../../edge/cloudflare/env.ts";
import { SettingError } from "../../../src/proxy/settings/resolve.ts";
import { DEFAULT_PART_BYTES } from "../../../edge/cloudflare/r2_store.ts";
import type { DurableObjectNamespace, R2Bucket } from "../../../edge/cloudflare/worker_types.ts";
import type { RepoSnapshotsRpc } from "../../../edge/cloudflare/snapshot_rpc.ts";

const edgeConfigFromEnv = (e: Env) => workerSettings(e).config;

/** An `Env` whose bindings are never touched by the functions under test. */
function env(vars: Partial<Env>): Env {
  return {
    PACKS: {} as R2Bucket,
    REPO_SNAPSHOTS: {} as DurableObjectNamespace<RepoSnapshotsRpc>,
    EDGE_SIGNING_KEY: "00112233445566778899aabbccddeeff",
    ...vars,
  };
}

Deno.test("workerSettings: single-origin mode with defaults", () => {
  assertEquals(edgeConfigFromEnv(env({ ORIGIN: "https://git.example/" })), {
    origin: "https://git.example",
    chunks: 4,
    urlTtlSeconds: 3600,
    maxRequestBytes: 16 << 20,
    bodyTimeoutSeconds: 60,
    buildBackoffSeconds: 60,
    authTtlSeconds: 30,
    lsRefsAheadSeconds: 10,
    responseCacheBytes: 1 << 30,
    snapshotPlainClones: true,
  });
});

Deno.test("workerSettings: multi-origin mode and every optional var", () => {
  const config = edgeConfigFromEnv(env({
    ALLOW_HOSTS: " GitHub.com, git.example:8443 ,",
    MULTI_ORIGIN_SCHEME: "http",
    PUBLIC_URL: "https://edge.example/",
    CHUNKS: "6",
    URL_TTL_SECONDS: "600",
    MAX_REQUEST_BYTES: "2048",
    BODY_TIMEOUT_SECONDS: "5",
    BUILD_BACKOFF_SECONDS: "0",
    AUTH_TTL_SECONDS: "0",
    RESPONSE_CACHE_BYTES: "0",
    SNAPSHOT_PLAIN_CLONES: "off",
    LS_REFS_AHEAD_SECONDS: "0",
    STORE_MAX_BYTES: "1000000",
    LOG_LEVEL: "warn",
    ADMIN_TOKEN: "secret",
  }));
  assertEquals(config, {
    allowHosts: ["github.com", "git.example:8443"],
    multiOriginScheme: "http",
    publicUrl: "https://edge.example",
    chunks: 6,
    urlTtlSeconds: 600,
    maxRequestBytes: 2048,
    bodyTimeoutSeconds: 5,
    buildBackoffSeconds: 0,
    authTtlSeconds: 0,
    responseCacheBytes: 0,
    snapshotPlainClones: false,
    lsRefsAheadSeconds: 0,
    storeMaxBytes: 1_000_000,
    adminToken: "secret",
  });
});

Deno.test("workerSettings: refuses missing, conflicting and malformed vars", () => {
  const cases: [Partial<Env>, RegExp][] = [
    [{}, /ORIGIN.*ALLOW_HOSTS/],
    [{ ORIGIN: "https://a", ALLOW_HOSTS: "b" }, /exclusive/],
    [{ ORIGIN: "ftp://a" }, /ORIGIN must be an http\(s\) URL/],
    [{ ORIGIN: "https://a", CHUNKS: "0" }, /CHUNKS must be an integer >= 1/],
    [{ ORIGIN: "https://a", URL_TTL_SECONDS: "ten" }, /URL_TTL_SECONDS/],
    [{ ALLOW_HOSTS: "a", MULTI_ORIGIN_SCHEME: "ftp" }, /MULTI_ORIGIN_SCHEME/],
  ];
  for (const [vars, message] of cases) {
    assertThrows(() => edgeConfigFromEnv(env(vars)), SettingError, message);
  }
});

Deno.test("EDGE_SIGNING_KEY is decoded from hex; short or missing keys are refused", () => {
  const signingKeyFromEnv = (e: Env) => workerSettings(e).signingKey;
  const origin = { ORIGIN: "https://git.example" };
  assertEquals(
    Array.from(signingKeyFromEnv(env(origin))),
    [
      0x00,
      0x11,
      0x22,
      0x33,
      0x44,
      0x55,
      0x66,
      0x77,
      0x88,
      0x99,
      0xaa,
      0xbb,
      0xcc,
      0xdd,
      0xee,
      0xff,
    ],
  );
  const short = assertThrows(
    () => signingKeyFromEnv(env({ ...origin, EDGE_SIGNING_KEY: "abcd" })),
    SettingError,
  );
  assertEquals(short.message, "EDGE_SIGNING_KEY must be at least 32 hex digits");
  assertThrows(
    () => signingKeyFromEnv(env({ ...origin, EDGE_SIGNING_KEY: " " })),
    SettingError,
    /secret put EDGE_SIGNING_KEY/,
  );
});

Deno.test("workerSettings: a var given as a TOML number is read as its digits", () => {
  const config = edgeConfigFromEnv(env({ ORIGIN: "https://o", CHUNKS: 6, AUTH_TTL_SECONDS: 0 }));
  assertEquals([config.chunks, config.authTtlSeconds], [6, 0]);
  assertThrows(
    () => edgeConfigFromEnv(env({ ORIGIN: "https://o", CHUNKS: 0 })),
    SettingError,
    /CHUNKS/,
  );
});

Deno.test("part size and refresh period come from their vars", () => {
  const settings = (vars: Partial<Env>) => workerSettings(env({ ORIGIN: "https://o", ...vars }));
  assertEquals(settings({}).r2PartMiB, 8);
  assertEquals(settings({ R2_PART_MIB: "5" }).r2PartMiB, 5);
  assertThrows(() => settings({ R2_PART_MIB: "4" }), SettingError, /R2_PART_MIB/);
  assertEquals(settings({}).refreshSeconds, undefined);
  assertEquals(settings({ REFRESH_SECONDS: "900" }).refreshSeconds, 900);
  assertThrows(() => settings({ REFRESH_SECONDS: "59" }), SettingError, /REFRESH_SECONDS/);
});

Deno.test("the R2 part size has one default: R2PackStore's is the table's R2_PART_MIB", () => {
  assertEquals(DEFAULT_PART_BYTES, workerSettings(env({ ORIGIN: "https://o" })).r2PartMiB << 20);
});
