/** The structured logger (src/proxy/core/log.ts): levels, both formats, and what it never writes. */
import { assert, assertEquals } from "../../support/assert.ts";
import { createLogger, type LogFormat } from "../../../src/proxy/core/log.ts";

function capture(format: LogFormat, level: "debug" | "info" | "warn" | "error" = "info") {
  const lines: string[] = [];
  const log = createLogger({ level, format, write: (l) => lines.push(l), now: () => 0 });
  return { log, lines };
}

Deno.test("log: records below the level are dropped; JSON lines carry time, level, event and the fields", () => {
  const { log, lines } = capture("json", "warn");
  log.log("info", "request", { status: 200 });
  log.log("warn", "origin.error", { status: 502, repo: "a/b.git", skipped: undefined });
  assertEquals(log.enabled("info"), false);
  assertEquals(lines.length, 1);
  assertEquals(JSON.parse(lines[0]), {
    time: "1970-01-01T00:00:00.000Z",
    level: "warn",
    event: "origin.error",
    status: 502,
    repo: "a/b.git",
  });
});

Deno.test("log: never a secret: fields named like one, URL credentials, in both formats", () => {
  for (const format of ["json", "text"] as const) {
    const { log, lines } = capture(format);
    log.log("info", "x", {
      authorization: "Basic dXNlcjpwdw==",
      adminToken: "tok-1",
      signingKey: new Uint8Array([1, 2]),
      headers: { Authorization: "Bearer tok-2", cookie: "c=1", accept: "*/*" },
      url: "https://user:hunter2@origin.example/x.git",
      error: new Error("fetch https://u:pw9@h/x failed"),
    });
    const line = lines[0];
    for (const secret of ["dXNlcjpwdw", "tok-1", "tok-2", "c=1", "hunter2", "pw9"]) {
      assert(!line.includes(secret), `${format}: ${secret} in ${line}`);
    }
    assert(line.includes("https://***@origin.example/x.git"), line);
    assert(line.includes("*/*"), "other fields stay");
  }
});

Deno.test("log: the text format is one readable line", () => {
  const { log, lines } = capture("text");
  log.log("info", "request", {
    method: "GET",
    route: "info/refs",
    status: 200,
    reason: "no snapshot",
  });
  assertEquals(
    lines[0],
    '1970-01-01T00:00:00.000Z INFO  request method=GET route=info/refs status=200 reason="no snapshot"',
  );
});
