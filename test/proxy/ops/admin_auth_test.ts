/** The admin token check: Bearer everywhere, Basic (token as password) only where asked for. */
import { isAdmin } from "../../../src/proxy/ops/admin_auth.ts";
import { assertEquals } from "../../support/assert.ts";

const T = "s3cret-token";
const basic = (user: string, password: string) => `Basic ${btoa(`${user}:${password}`)}`;

Deno.test("isAdmin: Bearer with the token, in any case of the scheme", () => {
  assertEquals(isAdmin(`Bearer ${T}`, T), true);
  assertEquals(isAdmin(`bearer ${T}`, T), true);
  assertEquals(isAdmin(`Bearer ${T}x`, T), false);
  assertEquals(isAdmin(`Bearer ${T.slice(0, -1)}`, T), false);
  assertEquals(isAdmin(`Bearer `, T), false);
  assertEquals(isAdmin(T, T), false, "no scheme");
  assertEquals(isAdmin(undefined, T), false);
  assertEquals(isAdmin(`Bearer ${T}`, ""), false, "no token set: nobody is admin");
  assertEquals(isAdmin("Bearer ", ""), false, "not even with an empty one");
  assertEquals(isAdmin(`Bearer ${"x".repeat(5000)}`, T), false);
});

Deno.test("isAdmin: Basic with the token as password, only where Basic is taken", () => {
  assertEquals(isAdmin(basic("admin", T), T, { basic: true }), true);
  assertEquals(isAdmin(basic("", T), T, { basic: true }), true, "any user name");
  assertEquals(isAdmin(basic("admin", T), T), false, "not on routes that act");
  assertEquals(isAdmin(basic("admin", `${T}x`), T, { basic: true }), false);
  assertEquals(isAdmin(basic(T, "x"), T, { basic: true }), false, "the user is not the password");
  assertEquals(isAdmin(`Basic ${btoa(T)}`, T, { basic: true }), false, "no colon");
  assertEquals(isAdmin("Basic %%%", T, { basic: true }), false, "not base64");
});
