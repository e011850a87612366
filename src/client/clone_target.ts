/** The directory a clone goes into: its default name, creation, and removal after a failure. */
import { CloneError } from "./errors.ts";

/**
 * `git clone`'s default directory: the last path segment, minus `.git` (kept for bare).
 *
 * @example The directory `git clone` would pick
 * ```ts
 * defaultDirectory("https://edge.example/x/y.git", false); // "y"
 * defaultDirectory("https://edge.example/x/y.git", true); // "y.git"
 * ```
 */
export function defaultDirectory(url: string, bare: boolean): string {
  const path = new URL(url).pathname.replace(/\/+$/, "").replace(/\/\.git$/, "");
  const last = path.slice(path.lastIndexOf("/") + 1).replace(/\.git$/, "") ||
    new URL(url).hostname;
  return bare ? `${last}.git` : last;
}

/** Creates the target (or accepts an existing empty one); returns whether we created it. */
export async function prepareTarget(directory: string): Promise<boolean> {
  try {
    await Deno.mkdir(directory);
    return true;
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
  }
  for await (const _ of Deno.readDir(directory)) {
    throw new CloneError(`destination path '${directory}' already exists and is not empty`);
  }
  return false;
}

/** Undoes a failed clone: removes the directory we created, or empties the one we were given. */
export async function removeTarget(directory: string, created: boolean): Promise<void> {
  if (created) {
    await Deno.remove(directory, { recursive: true });
    return;
  }
  for await (const entry of Deno.readDir(directory)) {
    await Deno.remove(`${directory}/${entry.name}`, { recursive: true });
  }
}
