/** The settings table as documented: docs/settings.md's table is the generated one, row for row. */
import { assert, assertEquals, assertThrows } from "../../support/assert.ts";
import { SETTINGS } from "../../../src/proxy/settings/table.ts";
import {
  DOC_BEGIN,
  DOC_END,
  settingsMarkdown,
  withSettingsTable,
} from "../../../src/proxy/settings/settings_doc.ts";

Deno.test("docs/settings.md's settings table is the one generated from the table (deno task settings)", async () => {
  const doc = await Deno.readTextFile(new URL("../../../docs/settings.md", import.meta.url));
  assert(
    doc.includes(settingsMarkdown()),
    "docs/settings.md's table differs: run deno task settings",
  );
  assertEquals(withSettingsTable(doc), doc, "run deno task settings");
  const stale = doc.replace("| `--chunks N`", "| `--chunk N` ");
  assert(withSettingsTable(stale) !== stale, "a changed row is noticed");
});

Deno.test("the generated table: a row per setting naming its flag, variables and minimum", () => {
  const rows = settingsMarkdown().split("\n").slice(2);
  assertEquals(rows.length, SETTINGS.length);
  SETTINGS.forEach((s, i) => {
    for (const name of [s.flag, s.env, s.workerVar]) {
      if (name !== undefined) assert(rows[i].includes(`\`${name}`), `${name} in ${rows[i]}`);
    }
    if (s.min !== undefined) assert(rows[i].includes(`| ${s.min} `), `${s.key}'s minimum`);
  });
  assertThrows(() => withSettingsTable(`no markers ${DOC_END} ${DOC_BEGIN}`), Error);
});
