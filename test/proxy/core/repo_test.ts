import { RepoPathError, resolveRepo, splitGitPath } from "../../../src/proxy/core/repo.ts";
import { assert, assertEquals } from "../../support/assert.ts";

const base = { chunks: 1, urlTtlSeconds: 60, maxRequestBytes: 1024 };

Deno.test("edge paths split into repository and smart-HTTP endpoint", () => {
  assertEquals(splitGitPath("/x/y.git/info/refs"), { path: "x/y.git", endpoint: "info/refs" });
  assertEquals(splitGitPath("/y/git-upload-pack"), { path: "y", endpoint: "git-upload-pack" });
  assertEquals(splitGitPath("/info/refs"), undefined);
  assertEquals(splitGitPath("/x/HEAD"), undefined);
});

Deno.test("single-origin mode maps onto the configured origin only", () => {
  const r = resolveRepo("x/y.git", { ...base, origin: "http://o.test/base/" });
  assertEquals(r.originUrl, "http://o.test/base/x/y.git");
  assertEquals(r.id.length, 32);
  for (
    const bad of [
      "../etc",
      "x/../../y",
      "x//y",
      "x/%2e%2e/y",
      "x/%2E%2E/y",
      "a%2F..%2Fb",
      "a%00b",
      "a%5Cb",
      "%",
      "./x",
    ]
  ) {
    let err: unknown;
    try {
      resolveRepo(bad, { ...base, origin: "http://o.test" });
    } catch (e) {
      err = e;
    }
    assert(err instanceof RepoPathError && err.status === 400, `refused ${bad}`);
  }
});

Deno.test("multi-origin mode reaches allow-listed hosts only", () => {
  const cfg = { ...base, allowHosts: ["git.example"] };
  assertEquals(resolveRepo("git.example/o/r.git", cfg).originUrl, "https://git.example/o/r.git");
  let err: unknown;
  try {
    resolveRepo("evil.example/o/r.git", cfg);
  } catch (e) {
    err = e;
  }
  assert(err instanceof RepoPathError && err.status === 403, "other host refused");
  assert(
    resolveRepo("git.example/r.git", cfg).id !== resolveRepo("git.example/s.git", cfg).id,
    "distinct ids",
  );
});

Deno.test("any segment the origin may serve maps onto one canonical origin URL", () => {
  const cfg = { ...base, origin: "http://o.test" };
  const cases: [string, string][] = [
    ["a+b.git", "http://o.test/a+b.git"],
    ["a@b.git", "http://o.test/a@b.git"],
    ["a%20b.git", "http://o.test/a%20b.git"],
    ["a b.git", "http://o.test/a%20b.git"],
    ["%C3%BCn%C3%AF.git", "http://o.test/%C3%BCn%C3%AF.git"],
    ["ünï.git", "http://o.test/%C3%BCn%C3%AF.git"],
    ["x/a%2Bb.git", "http://o.test/x/a+b.git"],
    ["%252e%252e", "http://o.test/%252e%252e"],
    ["q%3Fx%23y.git", "http://o.test/q%3Fx%23y.git"],
  ];
  for (const [path, url] of cases) assertEquals(resolveRepo(path, cfg).originUrl, url, path);
  assertEquals(resolveRepo("a+b.git", cfg).id, resolveRepo("a%2Bb.git", cfg).id, "one id");
  const multi = { ...base, allowHosts: ["git.example"] };
  assertEquals(
    resolveRepo("git.example/o/a%20b.git", multi).originUrl,
    "https://git.example/o/a%20b.git",
  );
});
