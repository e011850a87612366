import { assertEquals } from "../support/assert.ts";
import { fsyncsPacks, readFsyncsPacks } from "../../src/client/fsync_config.ts";
import { git, tempDir } from "../support/git.ts";

Deno.test("fsyncsPacks reads core.fsync the way git does", () => {
  const cases: [string | null, boolean][] = [
    [null, true], // git's default flushes packs
    ["", true],
    ["none", false],
    ["  none", false],
    ["none,pack", true], // "none" clears only as the whole rest of the value
    ["pack,none", true], // what is added stays
    ["-pack", false],
    ["-objects", false],
    ["-all", false],
    ["all,-pack", true], // an added component stays even when also removed
    ["-pack,pack", true],
    ["loose-object", true], // adds to the default, which has packs
    ["none,loose-object", true], // not the whole rest: the default stays
    ["-p", false], // a prefix names every component it begins: pack, pack-metadata
    ["-pack-metadata", true],
    ["-committed", false],
    ["-added", false],
    ["-reference", true],
    ["bogus", true],
    ["-bogus", true],
    ["-", true],
  ];
  for (const [value, expected] of cases) {
    assertEquals(fsyncsPacks(value), expected, `core.fsync=${JSON.stringify(value)}`);
  }
});

Deno.test("readFsyncsPacks asks the repository's git config", async () => {
  await using dir = await tempDir();
  const gitDir = `${dir.path}/r.git`;
  await git(["init", "-q", "--bare", gitDir]);
  assertEquals(await readFsyncsPacks(gitDir), true);
  await git(["config", "core.fsync", "none"], { cwd: gitDir });
  assertEquals(await readFsyncsPacks(gitDir), false);
  await git(["config", "core.fsync", "loose-object,-pack"], { cwd: gitDir });
  assertEquals(await readFsyncsPacks(gitDir), false);
  await git(["config", "core.fsync", "-loose-object"], { cwd: gitDir });
  assertEquals(await readFsyncsPacks(gitDir), true);
});
