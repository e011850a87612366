/**
 * Real protocol v2 transcripts produced by git at test time: a small
 * repository, what `git upload-pack` advertises and answers, and what a real
 * `git clone` sends.
 *
 * @module
 */

import { git, gitBytes } from "../support/git.ts";
import { SeededRandom } from "../support/random.ts";
import type { ChunkPlan } from "../support/streams.ts";
import { type CommandRequest, serializeCommandRequest } from "../../src/git/command_request.ts";

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

/** Creates the test repository inside `dir`. */
export async function makeRepo(dir: string): Promise<TestRepo> {
  const path = `${dir}/origin`;
  await git(["init", "-q", "-b", "main", path]);
  await Deno.writeTextFile(`${path}/hello.txt`, "hello\n");
  await git(["add", "hello.txt"], { cwd: path });
  await git(["commit", "-q", "-m", "first"], { cwd: path });
  await Deno.writeFile(`${path}/big.bin`, new SeededRandom(7).bytes(BIG_BLOB_SIZE));
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

/** The chunkings every protocol reader test feeds its input through. */
export const PLANS: ChunkPlan[] = [[1 << 22], "bytewise", { seed: 21 }, {
  seed: 22,
  maxChunk: 4000,
}];
/** The pack hash and URI that upload-pack is configured to announce for the big blob. */
export const FAKE_PACK_HASH = "ab".repeat(20);
export const CDN_URI = "https://cdn.example/pack-1.pack";

/** Real git transcripts shared by the protocol tests of one test file (each built on first use). */
export interface Transcripts {
  advertisement: Uint8Array;
  /** Requests written by a real `git clone --depth=1 --filter=blob:none`. */
  cloneRequests: Uint8Array;
  /** Requests written by a real `git clone --shallow-since --shallow-exclude`. */
  cloneRequestsSince: Uint8Array;
  /** upload-pack's answer to a plain fetch with progress. */
  fetchResponse: Uint8Array;
  /** Answer with wanted-refs, shallow-info, packfile-uris and packfile, sideband-all. */
  fullResponse: Uint8Array;
  /** The same request without sideband-all / packfile-uris. */
  plainSectionsResponse: Uint8Array;
  /** Acknowledgments without ready: ends in flush, no pack. */
  nakResponse: Uint8Array;
  /** Acknowledgments with ACK and ready, then the pack. */
  readyResponse: Uint8Array;
  lsRefsResponse: Uint8Array;
  unbornResponse: Uint8Array;
}

const LS_REFS: CommandRequest = {
  command: "ls-refs",
  capabilities: ["agent=git/2.39.5", "object-format=sha1"],
  args: ["peel", "symrefs", "unborn", "ref-prefix HEAD", "ref-prefix refs/"],
};

const SECTIONS_CONFIG = [
  "uploadpack.allowRefInWant=true",
  "uploadpack.allowSidebandAll=true",
];
const SECTION_ARGS = ["ofs-delta", "deepen 1", `want-ref refs/heads/main`, "done"];

const BUILDERS: { [K in keyof Transcripts]: (repo: TestRepo, dir: string) => Promise<Uint8Array> } =
  {
    advertisement: (repo) => advertisement(repo.path),
    cloneRequests: (repo, dir) =>
      captureCloneRequests(repo.path, dir, ["--depth=1", "--filter=blob:none"]),
    cloneRequestsSince: (repo, dir) =>
      captureCloneRequests(repo.path, dir, [
        "--shallow-since=2000-01-01",
        "--shallow-exclude=v1",
      ]),
    fetchResponse: (repo) =>
      uploadPack(repo.path, fetchRequest(["thin-pack", "ofs-delta", `want ${repo.main}`, "done"])),
    fullResponse: (repo) =>
      uploadPack(
        repo.path,
        fetchRequest(["sideband-all", ...SECTION_ARGS.slice(0, 3), "packfile-uris https", "done"]),
        sectionsConfig(repo),
      ),
    plainSectionsResponse: (repo) =>
      uploadPack(repo.path, fetchRequest(SECTION_ARGS), sectionsConfig(repo)),
    nakResponse: (repo) =>
      uploadPack(repo.path, fetchRequest([`want ${repo.main}`, `have ${"12".repeat(20)}`])),
    readyResponse: (repo) =>
      uploadPack(repo.path, fetchRequest([`want ${repo.main}`, `have ${repo.first}`])),
    lsRefsResponse: (repo) => uploadPack(repo.path, serializeCommandRequest(LS_REFS)),
    unbornResponse: async (_repo, dir) => {
      await git(["init", "-q", "-b", "trunk", `${dir}/empty`]);
      return await uploadPack(`${dir}/empty`, serializeCommandRequest(LS_REFS), [
        "lsrefs.unborn=advertise",
      ]);
    },
  };

function sectionsConfig(repo: TestRepo): string[] {
  return [
    ...SECTIONS_CONFIG,
    `uploadpack.blobPackfileUri=${repo.bigBlob} ${FAKE_PACK_HASH} ${CDN_URI}`,
  ];
}

let shared: Promise<{ dir: string; repo: TestRepo }> | undefined;
const built = new Map<keyof Transcripts, Promise<Uint8Array>>();

/**
 * The test repository and the named transcripts of it, each built once per test process (the
 * repository lives until the process exits).
 */
export async function transcripts<K extends keyof Transcripts>(
  ...names: K[]
): Promise<Pick<Transcripts, K> & { repo: TestRepo }> {
  const { dir, repo } = await (shared ??= sharedRepo());
  const got = {} as Pick<Transcripts, K>;
  for (const name of names) {
    let bytes = built.get(name);
    if (!bytes) built.set(name, bytes = BUILDERS[name](repo, dir));
    got[name] = await bytes;
  }
  return { ...got, repo };
}

async function sharedRepo(): Promise<{ dir: string; repo: TestRepo }> {
  const dir = await Deno.makeTempDir({ prefix: "gitedge-protocol-" });
  // Shared by all tests of a file; removed when the test process exits.
  globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
  const repo = await makeRepo(dir);
  await git(["config", "uploadpack.allowFilter", "true"], { cwd: repo.path });
  return { dir, repo };
}
