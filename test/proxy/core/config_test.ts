import { assertEquals } from "../../support/assert.ts";
import { DEFAULT_EDGE_CONFIG, withDefaults } from "../../../src/proxy/core/config.ts";

Deno.test("withDefaults fills what a config leaves unset or undefined, and keeps what it sets (0 too)", () => {
  const given = { origin: "https://o", chunks: 2, urlTtlSeconds: 60, maxRequestBytes: 1024 };
  const resolved = withDefaults({ ...given, authTtlSeconds: undefined, responseCacheBytes: 0 });
  assertEquals(resolved, {
    ...DEFAULT_EDGE_CONFIG,
    ...given,
    responseCacheBytes: 0,
  });
});
