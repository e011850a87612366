/**
 * Real protocol v2 transcripts produced by git at test time: a small
 * repository, what `git upload-pack` advertises and answers, and what a real
 * `git clone` sends.
 *
 * @module
 */

import { git, gitBytes } from "../support/git.ts";
import { seededRandom } from "../support/streams.ts";
import { serializeCommandRequest } from "../../src/git/command_request.ts";

/**
 * A throwaway repository: two commits on main (the second adds a large
 * blob), branch `small` and annotated tag `v1` on the first.
 */
export interface TestRepo {
  path: string;
  /** Tip of refs/heads/main. */
  main: string;
  /** First commit (parent of main). */
  first: string;
  /** The annotated tag object refs/tags/v1 and the commit it points at. */
  tag: string;
  /** Object id of the large incompressible blob (makes the pack span several packets). */
  bigBlob: string;
}

/** Size of the incompressible blob, chosen to need more than one 64 KiB side-band packet. */
export const BIG_BLOB_SIZE = 150_000;

function randomBytes(seed: number, n: number): Uint8Array {
  const rand = seededRandom(seed);
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(rand() * 256);
  return out;
}

/** Creates the test repository inside `dir`. */
export async function makeRepo(dir: string): Promise<TestRepo> {
  const path = `${dir}/origin`;
  await git(["init", "-q", "-b", "main", path]);
  await Deno.writeTextFile(`${path}/hello.txt`, "hello\n");
  await git(["add", "hello.txt"], { cwd: path });
  await git(["commit", "-q", "-m", "first"], { cwd: path });
  await Deno.writeFile(`${path}/big.bin`, randomBytes(7, BIG_BLOB_SIZE));
  await git(["add", "big.bin"], { cwd: path });
  await git(["commit", "-q", "-m", "second"], { cwd: path });
  await git(["tag", "-a", "v1", "-m", "v1", "HEAD~1"], { cwd: path });
  await git(["branch", "small", "HEAD~1"], { cwd: path });
  const rev = async (r: string) => (await git(["rev-parse", r], { cwd: path })).trim();
  return {
    path,
    main: await rev("main"),
    first: await rev("main~1"),
    tag: await rev("v1"),
    bigBlob: await rev("main:big.bin"),
  };
}

const V2 = { GIT_PROTOCOL: "version=2" };

/** The capability advertisement `git upload-pack` sends over smart HTTP. */
export async function advertisement(repo: string): Promise<Uint8Array> {
  return await gitBytes(["upload-pack", "--advertise-refs", "--stateless-rpc", repo], { env: V2 });
}

/** The response of `git upload-pack` to one stateless request. */
export async function uploadPack(
  repo: string,
  request: Uint8Array,
  config: string[] = [],
): Promise<Uint8Array> {
  const args = config.flatMap((c) => ["-c", c]);
  return await gitBytes([...args, "upload-pack", "--stateless-rpc", repo], {
    env: V2,
    stdin: request,
  });
}

/**
 * Everything a real `git clone` (protocol v2, file://) writes to
 * upload-pack: its ls-refs request followed by its fetch request(s).
 */
export async function captureCloneRequests(
  repo: string,
  workDir: string,
  cloneArgs: string[] = [],
): Promise<Uint8Array> {
  const capture = `${workDir}/capture-${crypto.randomUUID()}.bin`;
  const wrapper = `${capture}.sh`;
  await Deno.writeTextFile(wrapper, `#!/bin/sh\ntee '${capture}' | git-upload-pack "$@"\n`);
  await Deno.chmod(wrapper, 0o755);
  await git([
    "-c",
    "protocol.version=2",
    "clone",
    "-q",
    `--upload-pack=${wrapper}`,
    ...cloneArgs,
    `file://${repo}`,
    `${capture}.clone`,
  ]);
  return await Deno.readFile(capture);
}

/** A protocol v2 `fetch` request with `args`, with the capabilities git 2.39 sends. */
export function fetchRequest(args: string[]): Uint8Array {
  return serializeCommandRequest({
    command: "fetch",
    capabilities: ["agent=git/2.39.5", "object-format=sha1"],
    args,
  });
}
