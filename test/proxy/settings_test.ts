import { assertEquals, assertThrows } from "../support/assert.ts";
import {
  ConfigValueError,
  parseHttpUrl,
  parseIntAtLeast,
  parseSigningKeyHex,
} from "../../src/proxy/settings.ts";
import { parseServeArgs, UsageError } from "../../edge/deno/serve_cli.ts";

Deno.test("parseIntAtLeast takes safe integers from the minimum up", () => {
  assertEquals(parseIntAtLeast("60", 60), 60);
  assertEquals(parseIntAtLeast("0", 0), 0);
  for (const text of ["59", "1.5", "ten", "", "9007199254740993"]) {
    const e = assertThrows(() => parseIntAtLeast(text, 60), ConfigValueError);
    assertEquals([e.expected, e.value], ["an integer >= 60", text]);
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

Deno.test("gitedge serve words malformed flags as before", () => {
  const env = () => undefined;
  const usage = (args: string[]) =>
    assertThrows(() => parseServeArgs(args, env), UsageError).message;
  assertEquals(usage(["--origin", "x", "--chunks", "0"]), "--origin needs a URL, got 'x'");
  assertEquals(
    usage(["--origin=http://o", "--url-ttl", "59"]),
    "--url-ttl needs an integer >= 60",
  );
  assertEquals(
    usage(["--public-url", "ftp://p", "--origin", "http://o"]),
    "--public-url needs an http(s) URL, got 'ftp://p'",
  );
  const opts = parseServeArgs(["--origin", "https://o/", "--port", "0", "--chunks", "2"], env);
  assertEquals([opts.origin, opts.port, opts.chunks], ["https://o", 0, 2]);
});
