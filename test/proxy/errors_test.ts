import { GitFormatError } from "../../src/git/errors.ts";
import {
  ClientRequestError,
  EdgeHttpError,
  edgeHttpError,
  RequestTooLargeError,
} from "../../src/proxy/errors.ts";
import {
  OriginRedirectError,
  OriginStatusError,
  OriginUnreachableError,
} from "../../src/proxy/origin.ts";
import { RepoPathError } from "../../src/proxy/repo.ts";
import { assert, assertEquals } from "../support/assert.ts";

const CASES: [string, Error, number, string][] = [
  [
    "bad repository path",
    new RepoPathError("bad repository path: a/../b", 400),
    400,
    "gitedge: bad repository path: a/../b\n",
  ],
  [
    "host not allowed",
    new RepoPathError("origin host evil.test is not allowed on this edge", 403),
    403,
    "gitedge: origin host evil.test is not allowed on this edge\n",
  ],
  [
    "no origin",
    new RepoPathError("no origin is configured", 404),
    404,
    "gitedge: no origin is configured\n",
  ],
  [
    "body timeout",
    new ClientRequestError("request body not received within 5 s", 408),
    408,
    "gitedge: request body not received within 5 s\n",
  ],
  [
    "too large",
    new RequestTooLargeError("request body exceeds 100 bytes"),
    413,
    "gitedge: request body exceeds 100 bytes\n",
  ],
  [
    "wire data",
    new GitFormatError("bad-length", "bad pkt-line length"),
    400,
    "gitedge: bad request: bad pkt-line length\n",
  ],
  [
    "a src/git subclass",
    new (class extends GitFormatError {})("bad-request", "missing command"),
    400,
    "gitedge: bad request: missing command\n",
  ],
  [
    "origin status, credentials hidden",
    new OriginStatusError("https://u:secret@git.test/r.git/info/refs", 500, "boom"),
    502,
    "gitedge: origin answered 500 for https://***@git.test/r.git/info/refs: boom\n",
  ],
  [
    "origin unreachable, server path hidden",
    new OriginUnreachableError("https://git.test/r.git", new Error("no such file /srv/sock")),
    502,
    "gitedge: origin unreachable: https://git.test/r.git: no such file <path>\n",
  ],
  [
    "origin redirect",
    new OriginRedirectError("https://git.test/r.git/info/refs", 301),
    502,
    "gitedge: origin answered 301 (a redirect) for https://git.test/r.git/info/refs; the edge " +
    "does not follow origin redirects: configure the origin's final URL\n",
  ],
];

Deno.test("errors own their response: status, text/plain body git prints, no secrets", async () => {
  for (const [what, err, status, body] of CASES) {
    const known = edgeHttpError(err);
    assert(known instanceof EdgeHttpError, what);
    const res = known.response();
    assertEquals(res.status, status, what);
    assertEquals(res.headers.get("content-type"), "text/plain; charset=UTF-8", what);
    assertEquals(await res.text(), body, what);
  }
});

Deno.test("errors: the origin's own status stays on origin errors; others are internal", () => {
  const refused = new OriginStatusError("https://git.test/r.git", 401, "");
  assertEquals([refused.status, refused.originStatus], [502, 401]);
  assertEquals(new OriginRedirectError("https://git.test/r.git", 302).originStatus, 302);
  assertEquals(edgeHttpError(new Error("bug")), null);
  assertEquals(edgeHttpError(new TypeError("bug")), null);
  assertEquals(edgeHttpError("thrown string"), null);
});
