/**
 * `deno task settings`: writes the settings table (src/proxy/settings/table.ts) into
 * docs/settings.md between its markers. test/proxy/settings/settings_doc_test.ts fails when
 * docs/settings.md's table differs.
 */
import { withSettingsTable } from "../src/proxy/settings/settings_doc.ts";

const doc = new URL("../docs/settings.md", import.meta.url);
const before = await Deno.readTextFile(doc);
const after = withSettingsTable(before);
if (after !== before) await Deno.writeTextFile(doc, after);
console.log(
  after === before
    ? "docs/settings.md: settings table up to date"
    : "docs/settings.md: settings table written",
);
