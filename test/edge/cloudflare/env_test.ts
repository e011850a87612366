import { assertEquals, assertThrows } from "../../support/assert.ts";
import {
  edgeConfigFromEnv,
  type Env,
  partBytesFromEnv,
  refreshMsFromEnv,
  signingKeyFromEnv,
  WorkerConfigError,
} from "../../../edge/cloudflare/env.ts";
import type { DurableObjectNamespace, R2Bucket } from "../../../edge/cloudflare/worker_types.ts";

/** An `Env` whose bindings are never touched by the functions under test. */
function env(vars: Partial<Env>): Env {
  return {
    PACKS: {} as R2Bucket,
    REPO_COORDINATOR: {} as DurableObjectNamespace,
    EDGE_SIGNING_KEY: "00112233445566778899aabbccddeeff",
    ...vars,
  };
}

Deno.test("edgeConfigFromEnv: single-origin mode with defaults", () => {
  assertEquals(edgeConfigFromEnv(env({ ORIGIN: "https://git.example/" })), {
    origin: "https://git.example",
    chunks: 4,
    urlTtlSeconds: 3600,
    maxRequestBytes: 16 << 20,
    bodyTimeoutSeconds: 60,
    buildBackoffSeconds: 60,
    authTtlSeconds: 30,
    responseCacheBytes: 1 << 30,
  });
});

Deno.test("edgeConfigFromEnv: multi-origin mode and every optional var", () => {
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
    adminToken: "secret",
  });
});

Deno.test("edgeConfigFromEnv: refuses missing, conflicting and malformed vars", () => {
  const cases: [Partial<Env>, RegExp][] = [
    [{}, /ORIGIN.*ALLOW_HOSTS/],
    [{ ORIGIN: "https://a", ALLOW_HOSTS: "b" }, /exclusive/],
    [{ ORIGIN: "ftp://a" }, /ORIGIN must be an http\(s\) URL/],
    [{ ORIGIN: "https://a", CHUNKS: "0" }, /CHUNKS must be an integer >= 1/],
    [{ ORIGIN: "https://a", URL_TTL_SECONDS: "ten" }, /URL_TTL_SECONDS/],
    [{ ALLOW_HOSTS: "a", MULTI_ORIGIN_SCHEME: "ftp" }, /MULTI_ORIGIN_SCHEME/],
  ];
  for (const [vars, message] of cases) {
    assertThrows(() => edgeConfigFromEnv(env(vars)), WorkerConfigError, message);
  }
});

Deno.test("signingKeyFromEnv decodes hex and refuses short or missing keys", () => {
  assertEquals(
    Array.from(signingKeyFromEnv(env({}))),
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
  assertThrows(() => signingKeyFromEnv(env({ EDGE_SIGNING_KEY: "abcd" })), WorkerConfigError);
  assertThrows(
    () => signingKeyFromEnv(env({ EDGE_SIGNING_KEY: "" })),
    Error,
    /secret put EDGE_SIGNING_KEY/,
  );
});

Deno.test("part size and refresh period come from their vars", () => {
  assertEquals(partBytesFromEnv(env({})), 8 << 20);
  assertEquals(partBytesFromEnv(env({ R2_PART_MIB: "5" })), 5 << 20);
  assertThrows(() => partBytesFromEnv(env({ R2_PART_MIB: "4" })), WorkerConfigError);
  assertEquals(refreshMsFromEnv(env({})), null);
  assertEquals(refreshMsFromEnv(env({ REFRESH_SECONDS: "900" })), 900_000);
});
