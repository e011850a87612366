import { assertEquals, assertThrows } from "../support/assert.ts";
import { exitCodeFor, parseCloneArgs } from "../../src/client/clone_cli.ts";
import {
  HttpStatusError,
  IndexPackError,
  NetworkError,
  PackfileDownloadError,
  StallError,
  UsageError,
  VerificationError,
} from "../../src/client/errors.ts";

Deno.test("parseCloneArgs accepts the documented flags in any order", () => {
  assertEquals(
    parseCloneArgs(["--jobs", "4", "https://h/x.git", "dir", "--bare", "--branch=dev", "--json"]),
    {
      jobs: 4,
      bare: true,
      json: true,
      help: false,
      trustEdgeIndex: false,
      spool: "auto",
      branch: "dev",
      url: "https://h/x.git",
      directory: "dir",
    },
  );
  assertEquals(parseCloneArgs(["--jobs=0", "-b", "main", "http://h/y"]).branch, "main");
  assertEquals(parseCloneArgs(["--trust-edge-index", "http://h/y"]).trustEdgeIndex, true);
  assertEquals(parseCloneArgs(["--spool", "never", "http://h/y"]).spool, "never");
  assertEquals(parseCloneArgs(["--spool=always", "http://h/y"]).spool, "always");
  assertEquals(parseCloneArgs(["--help"]).help, true);
});

Deno.test("parseCloneArgs rejects bad input with UsageError, without echoing credentials", () => {
  for (
    const args of [
      [],
      ["--jobs", "x", "https://h/x"],
      ["--jobs"],
      ["--spool", "sometimes", "https://h/x"],
      ["--spool"],
      ["--frobnicate", "https://h/x"],
      ["https://h/x", "a", "b"],
      ["git@h:x.git"],
    ]
  ) {
    assertThrows(() => parseCloneArgs(args), UsageError);
  }
  const error = assertThrows(() => parseCloneArgs(["ftp://u:pw@h/x"]), UsageError);
  assertEquals(error.message.includes("pw"), false, error.message);
});

Deno.test("exitCodeFor maps failures to the documented codes", () => {
  const url = "https://h/x";
  assertEquals(exitCodeFor(new UsageError("x")), 2);
  assertEquals(exitCodeFor(new HttpStatusError(url, 404)), 3);
  assertEquals(exitCodeFor(new NetworkError(url, new TypeError("refused"))), 3);
  assertEquals(exitCodeFor(new PackfileDownloadError(url, 5, new StallError(url, 10))), 3);
  assertEquals(exitCodeFor(new PackfileDownloadError(url, 5, new IndexPackError(128, "bad"))), 4);
  assertEquals(exitCodeFor(new VerificationError(url, "a".repeat(40), "b".repeat(40))), 4);
  assertEquals(exitCodeFor(new Error("other")), 1);
});
