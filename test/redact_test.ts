import { publicMessage, redactCredentials, redactUrl, replaceUrls } from "../src/redact.ts";
import { assertEquals } from "./support/assert.ts";

Deno.test("redaction: URLs lose their credentials, client messages their URLs and paths", () => {
  assertEquals(redactUrl("https://alice:s3cret@git.test/r.git"), "https://git.test/r.git");
  assertEquals(redactUrl("not a url"), "not a url");
  assertEquals(
    redactCredentials("fetching https://alice:s3cret@git.test/r.git failed"),
    "fetching https://***@git.test/r.git failed",
  );
  assertEquals(replaceUrls("see https://a:b@h/x and http://h/y.", "<url>"), "see <url> and <url>");
  assertEquals(
    publicMessage(new Error("open /srv/store/x failed for https://a:b@origin/r.git")),
    "open <path> failed for <url>",
  );
});
