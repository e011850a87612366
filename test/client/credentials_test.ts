import { assert, assertEquals } from "../support/assert.ts";
import {
  type Credential,
  type CredentialHelper,
  CredentialManager,
  GitCredentialHelper,
} from "../../src/client/credentials.ts";
import { GIT_ENV, tempDir } from "../support/git.ts";

class RecordingHelper implements CredentialHelper {
  calls: string[] = [];
  constructor(private readonly answer: Credential | null) {}
  fill(url: URL, username?: string) {
    this.calls.push(`fill ${url.host} ${username ?? "-"}`);
    return Promise.resolve(this.answer);
  }
  approve(_url: URL, c: Credential) {
    this.calls.push(`approve ${c.username}`);
    return Promise.resolve();
  }
  reject(_url: URL, c: Credential) {
    this.calls.push(`reject ${c.username}`);
    return Promise.resolve();
  }
}

const basic = (user: string, pass: string) => `Basic ${btoa(`${user}:${pass}`)}`;

Deno.test("credentials: environment header wins and is never replaced", async () => {
  const helper = new RecordingHelper({ username: "h", password: "p" });
  const manager = new CredentialManager("http://u:p@h.test/r.git", "Bearer t0ken", helper);
  assertEquals(manager.authorization, "Bearer t0ken");
  assertEquals(await manager.renew(), false);
  assertEquals(helper.calls, []);
  assertEquals(manager.url.toString(), "http://h.test/r.git");
});

Deno.test("credentials: user:password in the URL become Basic auth", async () => {
  const helper = new RecordingHelper(null);
  const manager = new CredentialManager("http://al%40ice:s3cr%3At@h.test/r.git", undefined, helper);
  assertEquals(manager.authorization, basic("al@ice", "s3cr:t"));
  assertEquals(await manager.renew(), false);
});

Deno.test("credentials: git credential fill after a 401, approve on success, reject on failure", async () => {
  const helper = new RecordingHelper({ username: "bob", password: "pw" });
  const manager = new CredentialManager("http://bob@h.test/r.git", undefined, helper);
  assertEquals(manager.authorization, undefined);
  assertEquals(await manager.renew(), true);
  assertEquals(manager.authorization, basic("bob", "pw"));
  await manager.confirm();
  assertEquals(helper.calls, ["fill h.test bob", "approve bob"]);

  const failing = new RecordingHelper({ username: "eve", password: "bad" });
  const second = new CredentialManager("http://h.test/r.git", undefined, failing);
  assertEquals(await second.renew(), true);
  assertEquals(await second.renew(), false, "a second 401 gives up");
  assertEquals(failing.calls, ["fill h.test -", "reject eve"]);
  assertEquals(second.authorization, undefined);
});

Deno.test("GitCredentialHelper talks to a real git credential store", async () => {
  await using dir = await tempDir();
  const store = `${dir.path}/store`;
  const env = {
    ...GIT_ENV,
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "credential.helper",
    GIT_CONFIG_VALUE_0: `store --file=${store}`,
  };
  const helper = new GitCredentialHelper(env);
  const url = new URL("http://127.0.0.1:9/team/app.git");
  assertEquals(await helper.fill(url), null, "nothing stored, no terminal: no credential");
  await helper.approve(url, { username: "ann", password: "pw1" });
  assert((await Deno.readTextFile(store)).includes("ann"));
  assertEquals(await helper.fill(url), { username: "ann", password: "pw1" });
  await helper.reject(url, { username: "ann", password: "pw1" });
  assertEquals(await helper.fill(url), null);
});
