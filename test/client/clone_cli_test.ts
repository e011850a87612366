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

Deno.test("parseCloneArgs takes git clone's options for CI checkouts", () => {
  const args = parseCloneArgs([
    "-q",
    "--depth=1",
    "--no-single-branch",
    "--no-tags",
    "--filter",
    "blob:none",
    "-n",
    "--recurse-submodules",
    "-c",
    "core.autocrlf=false",
    "--config=x.y=a=b",
    "--progress",
    "https://h/x.git",
  ]);
  assertEquals(
    [args.quiet, args.depth, args.singleBranch, args.noTags, args.filter, args.noCheckout],
    [true, 1, false, true, "blob:none", true],
  );
  assertEquals([args.recurseSubmodules, args.progress], [true, true]);
  assertEquals(args.config, [["core.autocrlf", "false"], ["x.y", "a=b"]]);
  assertEquals(
    parseCloneArgs(["--revision", "refs/tags/v1", "http://h/y"]).revision,
    "refs/tags/v1",
  );
  assertEquals(parseCloneArgs(["--single-branch", "http://h/y"]).singleBranch, true);
  assertEquals(parseCloneArgs(["--version"]).version, true);
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
      ["--depth", "0", "https://h/x"],
      ["--depth", "-1", "https://h/x"],
      ["--depth", "1e3", "https://h/x"],
      ["--depth", "99999999999", "https://h/x"],
      ["-c", "novalue", "https://h/x"],
      ["-c", "nodot=1", "https://h/x"],
      ["--filter", "blob:none x", "https://h/x"],
      ["--revision", "a..b^", "https://h/x"],
      ["--revision", "--upload-pack=x", "https://h/x"],
      ["--revision", "v1", "--branch", "main", "https://h/x"],
      ["--revision", "x".repeat(5000), "https://h/x"],
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
