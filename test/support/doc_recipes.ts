/**
 * The command blocks of a docs page marked `<!-- recipe: NAME -->` (the fenced block right after
 * the marker), so a test runs what the page says, word for word.
 */
const ROOT = new URL("../../", import.meta.url).pathname;

/** The lines of recipe `name` in `page` (a path from the repository root), comments dropped. */
export async function docRecipe(page: string, name: string): Promise<string[]> {
  const text = await Deno.readTextFile(`${ROOT}${page}`);
  const marker = `<!-- recipe: ${name} -->`;
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`${page} has no recipe '${name}'`);
  const block = /```\w*\n([\s\S]*?)```/.exec(text.slice(at + marker.length));
  if (block === null) throw new Error(`${page}: recipe '${name}' has no code block`);
  return block[1].split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
}
