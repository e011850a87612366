/**
 * `deno task settings`: writes the settings table (src/proxy/settings/table.ts) into README.md between
 * its markers. test/proxy/settings/settings_doc_test.ts fails when README.md's table differs.
 */
import { withSettingsTable } from "../src/proxy/settings/settings_doc.ts";

const readme = new URL("../README.md", import.meta.url);
const before = await Deno.readTextFile(readme);
const after = withSettingsTable(before);
if (after !== before) await Deno.writeTextFile(readme, after);
console.log(
  after === before ? "README.md: settings table up to date" : "README.md: settings table written",
);
