import { GitFormatError } from "../../../src/git/errors.ts";
import {
  ClientRequestError,
  EdgeHttpError,
  edgeHttpError,
  RequestTooLargeError,
} from "../../../src/proxy/core/errors.ts";
import {
  OriginAnswerError,
  OriginRedirectError,
  OriginStatusError,
  OriginUnreachableError,
} from "../../../src/proxy/origin/origin.ts";
import { RepoPathError } from "../../../src/proxy/core/repo.ts";
import { assert, assertEquals } from "../../support/assert.ts";

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
    "origin status: the endpoint, not the origin's URL or credentials",
    new OriginStatusError("https://u:secret@git.test/r.git/info/refs?service=x", 500, "boom"),
    502,
    "gitedge: origin answered 500 to info/refs: boom\n",
  ],
  [
    "origin unreachable: no URL (the runtime's message names it), no server path",
    new OriginUnreachableError(
      "https://git.test/r.git/git-upload-pack",
      new TypeError(
        "error sending request for url (https://git.test/r.git/git-upload-pack): no such file " +
          "/srv/sock",
      ),
    ),
    502,
    "gitedge: origin unreachable (git-upload-pack): error sending request for url (<origin>): " +
    "no such file <path>\n",
  ],
  [
    "origin redirect: no URL",
    new OriginRedirectError("https://git.test/r.git/info/refs", 301),
    502,
    "gitedge: origin answered 301 (a redirect) to info/refs; the edge does not follow origin " +
    "redirects: configure the origin's final URL\n",
  ],
  [
    "origin answer unusable",
    new OriginAnswerError("http://10.0.0.7:8080/git/r.git/git-upload-pack", "was cut short: reset"),
    502,
    "gitedge: origin's answer to git-upload-pack was cut short: reset\n",
  ],
  [
    "any other URL in a message is removed too",
    new EdgeHttpError("the store at https://bucket.internal/x?sig=abc refused", 503),
    503,
    "gitedge: the store at <url> refused\n",
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
