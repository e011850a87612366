import { assertEquals, assertThrows } from "../support/assert.ts";
import { chooseCheckout, wantedObjects } from "../../src/client/checkout.ts";
import { defaultDirectory } from "../../src/client/clone_target.ts";
import { CloneError } from "../../src/client/errors.ts";
import type { RemoteRef } from "../../src/client/upload_pack.ts";

const A = "a".repeat(40);
const B = "b".repeat(40);
const T = "c".repeat(40);
const refs: RemoteRef[] = [
  { oid: A, name: "HEAD", symrefTarget: "refs/heads/main" },
  { oid: A, name: "refs/heads/main" },
  { oid: B, name: "refs/heads/dev" },
  { oid: T, name: "refs/tags/v1", peeled: B },
];

Deno.test("wantedObjects takes every branch and tag tip once", () => {
  assertEquals(wantedObjects(refs), [A, B, T]);
});

Deno.test("chooseCheckout follows HEAD, --branch, a tag (detached), or fails", () => {
  assertEquals(chooseCheckout(refs, undefined), { ref: "refs/heads/main", oid: A });
  assertEquals(chooseCheckout(refs, "dev"), { ref: "refs/heads/dev", oid: B });
  assertEquals(chooseCheckout(refs, "v1"), { ref: null, oid: B });
  assertThrows(() => chooseCheckout(refs, "nope"), CloneError);
  const unborn: RemoteRef[] = [{ oid: null, name: "HEAD", symrefTarget: "refs/heads/trunk" }];
  assertEquals(chooseCheckout(unborn, undefined), { ref: "refs/heads/trunk", oid: null });
});

Deno.test("defaultDirectory mirrors git clone's naming", () => {
  assertEquals(defaultDirectory("https://h.test/team/app.git", false), "app");
  assertEquals(defaultDirectory("https://h.test/team/app.git", true), "app.git");
  assertEquals(defaultDirectory("https://u:p@h.test/team/app/", false), "app");
  assertEquals(defaultDirectory("https://h.test/team/app/.git", false), "app");
  assertEquals(defaultDirectory("https://h.test/", false), "h.test");
});
