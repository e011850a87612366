/** The settings table as documented: README.md's table is the generated one, row for row. */
import { assert, assertEquals, assertThrows } from "../../support/assert.ts";
import { SETTINGS } from "../../../src/proxy/settings/table.ts";
import {
  README_BEGIN,
  README_END,
  settingsMarkdown,
  withSettingsTable,
} from "../../../src/proxy/settings/settings_doc.ts";

Deno.test("README.md's settings table is the one generated from the table (deno task settings)", async () => {
  const readme = await Deno.readTextFile(new URL("../../../README.md", import.meta.url));
  assert(readme.includes(settingsMarkdown()), "README.md's table differs: run deno task settings");
  assertEquals(withSettingsTable(readme), readme, "run deno task settings");
  const stale = readme.replace("| `--chunks N`", "| `--chunk N` ");
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
  assertThrows(() => withSettingsTable(`no markers ${README_END} ${README_BEGIN}`), Error);
});
