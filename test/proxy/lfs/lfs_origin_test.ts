import { assert, assertEquals } from "../../support/assert.ts";
import {
  BatchAnswerError,
  BatchRequestError,
  grantedObjects,
  hrefAllowed,
  parseBatchRequest,
} from "../../../src/proxy/lfs/lfs_origin.ts";

const OID = "c".repeat(64);
const enc = (v: unknown) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));

function refused(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a refusal");
}

Deno.test("lfs batch requests: checked before the origin sees them", () => {
  assertEquals(
    parseBatchRequest(enc({ operation: "download", objects: [{ oid: OID, size: 5 }] })),
    {
      operation: "download",
      objects: [{ oid: OID, size: 5 }],
    },
  );
  for (
    const [body, status] of [
      ["{", 400],
      [[], 400],
      [{ operation: "download" }, 400],
      [{ operation: "delete", objects: [] }, 422],
      [{ operation: "upload", objects: [{ oid: OID.toUpperCase(), size: 1 }] }, 422],
      [{ operation: "upload", objects: [{ oid: OID, size: 1.5 }] }, 422],
      [{ operation: "upload", objects: [{ oid: OID, size: "1" }] }, 422],
      [{ operation: "upload", objects: Array(1001).fill({ oid: OID, size: 1 }) }, 422],
    ] as const
  ) {
    const e = refused(() => parseBatchRequest(enc(body)));
    assert(e instanceof BatchRequestError, String(e));
    assertEquals((e as BatchRequestError).status, status, JSON.stringify(body).slice(0, 40));
  }
});

Deno.test("lfs batch answers: granted downloads, and garbage refused", () => {
  const asked = [{ oid: OID, size: 5 }];
  const good = {
    objects: [{
      oid: OID,
      size: 5,
      actions: { download: { href: "https://o/x", header: { a: "b" } } },
    }],
  };
  assertEquals(grantedObjects(good, asked).granted, [{
    index: 0,
    object: { oid: OID, size: 5, href: "https://o/x", header: { a: "b" } },
  }]);
  assertEquals(
    grantedObjects({ objects: [{ oid: OID, size: 5, error: { code: 404 } }] }, asked).granted,
    [],
  );
  const dl = (d: unknown, o: Record<string, unknown> = {}) => ({
    objects: [{ oid: OID, size: 5, actions: { download: d }, ...o }],
  });
  for (
    const bad of [
      null,
      { objects: {} },
      { objects: [1] },
      dl({ href: "https://o/x" }, { oid: "d".repeat(64) }),
      dl({ href: "https://o/x" }, { size: 6 }),
      dl({}),
      dl({ href: "file:///etc/passwd" }),
      dl({ href: "not a url" }),
      dl({ href: "https://o/x", header: { a: 1 } }),
    ]
  ) {
    assert(
      refused(() => grantedObjects(bad, asked)) instanceof BatchAnswerError,
      JSON.stringify(bad),
    );
  }
});

Deno.test("lfs download hrefs: public hosts and the LFS server's own; no other private address", () => {
  const endpoint = "https://git.example/x.git/info/lfs";
  for (const ok of ["https://git.example/o", "https://s3.amazonaws.com/b/o", "http://8.8.8.8/o"]) {
    assert(hrefAllowed(new URL(ok), endpoint), ok);
  }
  for (
    const bad of [
      "http://127.0.0.1:8080/o",
      "http://localhost/o",
      "http://169.254.169.254/latest/meta-data",
      "http://10.1.2.3/o",
      "http://172.20.0.1/o",
      "http://192.168.1.1/o",
      "http://[::1]/o",
      "http://[fd00::1]/o",
      "http://[::ffff:127.0.0.1]/o",
      "http://metadata.google.internal/o",
    ]
  ) {
    assert(!hrefAllowed(new URL(bad), endpoint), bad);
  }
  assert(hrefAllowed(new URL("http://127.0.0.1:9/o"), "http://127.0.0.1:9/x.git/info/lfs"));
  const answer = {
    objects: [{ oid: OID, size: 5, actions: { download: { href: "http://10.0.0.1/x" } } }],
  };
  assert(
    refused(() => grantedObjects(answer, [{ oid: OID, size: 5 }], endpoint)) instanceof
      BatchAnswerError,
  );
});
