/**
 * An LFS origin for tests: a `git http-backend` origin (`origin.ts`) with a small Git LFS server
 * in front of it at `<repo>/info/lfs` (the batch API with the basic transfer over a directory, the
 * verify action and the locks API), HTTP Basic auth, private repositories, and counters of what
 * it sent. Test support: simple on purpose, correct where the client checks.
 *
 * Objects are kept per repository (`<root>/<repo>/<oid>`), so one repository may lose an object
 * another keeps. Download hrefs point at `/_lfs/<repo>/<oid>` on this server (as the request's
 * `Host` names it, so through a relay they go through the relay) and carry the
 * caller's own `Authorization` in the action's `header` (as real servers hand out short-lived
 * credentials there). Faults: `truncate` (oids whose downloads break off halfway), `corrupt` (a
 * byte of the download inverted), `garbage` (the batch API answers 200 with something that is not
 * JSON).
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { type Origin, startOrigin } from "./origin.ts";
import { serveLoopback } from "./http_server.ts";
import { git, GIT_ENV } from "./git.ts";

export interface LfsOriginStats {
  /** Object bytes sent by the download href (what a clone costs the LFS origin). */
  objectBytes: number;
  /** Object downloads started. */
  objectGets: number;
  batches: number;
  uploads: number;
  uploadBytes: number;
  lockCalls: number;
  verifies: number;
  /** Authorization headers seen on batch requests (to check what the edge forwards). */
  batchAuth: (string | null)[];
}

export interface LfsOriginOptions {
  /** Users and their passwords. */
  users?: Record<string, string>;
  /** Private repositories (e.g. `p.git`) and the users who may read and write them. */
  privateRepos?: Record<string, string[]>;
}

export interface LfsOrigin extends AsyncDisposable {
  /** `http://127.0.0.1:PORT`: Git smart HTTP and LFS. */
  url: string;
  git: Origin;
  stats: LfsOriginStats;
  resetStats(): void;
  /** Oids whose downloads break off after half their bytes. */
  truncate: Set<string>;
  /** Oids whose downloads have their first byte inverted (right length, wrong content). */
  corrupt: Set<string>;
  /** When true, the batch API answers 200 with garbage. */
  garbage: { on: boolean };
  /** When true, a download is granted whatever size the request names (the object exists). */
  anySize: { on: boolean };
  /** Milliseconds each object download waits before it answers. */
  delay: { ms: number };
  /** Removes object `oid` of repository `repo`. */
  deleteObject(repo: string, oid: string): Promise<void>;
  /** Whether repository `repo` has object `oid`. */
  hasObject(repo: string, oid: string): Promise<boolean>;
  stop(): Promise<void>;
}

const JSON_TYPE = "application/vnd.git-lfs+json";
const OID = /^[0-9a-f]{64}$/;

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The SHA-256 (hex) of `bytes`: an LFS oid. */
export function lfsOid(bytes: Uint8Array): string {
  return hex(sha256(bytes));
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": JSON_TYPE, ...headers },
  });
}

export async function startLfsOrigin(opts: LfsOriginOptions = {}): Promise<LfsOrigin> {
  const gitOrigin = await startOrigin();
  const root = await Deno.makeTempDir({ prefix: "gitedge-lfs-origin-" });
  const users = opts.users ?? {};
  const privateRepos = opts.privateRepos ?? {};
  const fresh = (): LfsOriginStats => ({
    objectBytes: 0,
    objectGets: 0,
    batches: 0,
    uploads: 0,
    uploadBytes: 0,
    lockCalls: 0,
    verifies: 0,
    batchAuth: [],
  });
  const stats = fresh();
  const truncate = new Set<string>();
  const corrupt = new Set<string>();
  const garbage = { on: false };
  const anySize = { on: false };
  const delay = { ms: 0 };
  const locks = new Map<string, { id: string; path: string; owner: string }>();
  let nextLock = 1;

  /** The user `authorization` names: a name, null (anonymous), or "bad" (wrong password). */
  const userOf = (authorization: string | null): string | null | "bad" => {
    if (!authorization) return null;
    const m = /^Basic (.+)$/i.exec(authorization);
    if (!m) return "bad";
    let decoded: string;
    try {
      decoded = atob(m[1]);
    } catch {
      return "bad";
    }
    const at = decoded.indexOf(":");
    const [user, password] = [decoded.slice(0, at), decoded.slice(at + 1)];
    return at > 0 && users[user] !== undefined && users[user] === password ? user : "bad";
  };
  /** A refusal, or null when `authorization` may `write` (or read) `repo`. */
  const refusal = (repo: string, authorization: string | null, write: boolean): Response | null => {
    const user = userOf(authorization);
    const challenge = { "lfs-authenticate": 'Basic realm="lfs"' };
    if (user === "bad") return json(401, { message: "Bad credentials" }, challenge);
    const allowed = privateRepos[repo];
    if (allowed) {
      if (user === null) return json(401, { message: "Credentials needed" }, challenge);
      if (!allowed.includes(user)) return json(404, { message: "Repository not found" });
    } else if (write && user === null) {
      return json(401, { message: "Credentials needed" }, challenge);
    }
    return null;
  };
  const objectPath = (repo: string, oid: string) => `${root}/${repo.replaceAll("/", "%2F")}/${oid}`;
  const sizeOf = async (repo: string, oid: string): Promise<number | null> => {
    try {
      return (await Deno.stat(objectPath(repo, oid))).size;
    } catch {
      return null;
    }
  };

  const server = serveLoopback(async (req) => {
    const url = new URL(req.url);
    // Hrefs name this server as the client reached it (through a relay or WAN link: the link).
    const base = url.origin;
    const auth = req.headers.get("authorization");
    const action = (href: string) => ({
      href,
      ...(auth ? { header: { Authorization: auth } } : {}),
      expires_in: 3600,
    });
    const obj = /^\/_lfs\/(.+)\/([0-9a-f]{64})$/.exec(url.pathname);
    if (obj) {
      const [, repo, oid] = obj;
      const refused = refusal(repo, auth, req.method === "PUT");
      if (refused) return refused;
      if (req.method === "PUT") {
        const bytes = new Uint8Array(await req.arrayBuffer());
        if (lfsOid(bytes) !== oid) return json(422, { message: "content does not match oid" });
        await Deno.mkdir(objectPath(repo, oid).replace(/\/[^/]*$/, ""), { recursive: true });
        await Deno.writeFile(objectPath(repo, oid), bytes);
        stats.uploads++;
        stats.uploadBytes += bytes.byteLength;
        return new Response(null, { status: 200 });
      }
      let bytes: Uint8Array;
      try {
        bytes = await Deno.readFile(objectPath(repo, oid));
      } catch {
        return json(404, { message: "Object does not exist" });
      }
      stats.objectGets++;
      if (delay.ms > 0) await new Promise((resolve) => setTimeout(resolve, delay.ms));
      const cut = truncate.has(oid);
      const sent = cut ? bytes.subarray(0, bytes.byteLength >> 1) : bytes.slice();
      if (corrupt.has(oid)) sent[0] ^= 0xff;
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          stats.objectBytes += sent.byteLength;
          controller.enqueue(sent.slice());
          if (cut) controller.error(new Error("truncated on purpose"));
          else controller.close();
        },
      });
      return new Response(body, {
        headers: {
          "content-type": "application/octet-stream",
          "content-length": String(bytes.byteLength),
        },
      });
    }
    const lfs = /^\/(.+?)\/info\/lfs\/(.*)$/.exec(url.pathname);
    if (lfs) {
      const [, repo, rest] = lfs;
      if (rest === "objects/batch" && req.method === "POST") {
        stats.batches++;
        stats.batchAuth.push(auth);
        const request = await req.json() as {
          operation: string;
          objects: { oid: string; size: number }[];
        };
        const write = request.operation === "upload";
        const refused = refusal(repo, auth, write);
        if (refused) return refused;
        if (garbage.on) return new Response("<html>oops</html>", { status: 200 });
        const objects = [];
        for (const { oid, size } of request.objects) {
          if (!OID.test(oid)) {
            objects.push({ oid, size, error: { code: 422, message: "bad oid" } });
            continue;
          }
          const have = await sizeOf(repo, oid);
          const href = `${base}/_lfs/${repo}/${oid}`;
          if (!write) {
            objects.push(
              have === size || (anySize.on && have !== null)
                ? { oid, size, actions: { download: action(href) } }
                : { oid, size, error: { code: 404, message: "Object does not exist" } },
            );
          } else if (have === size) {
            objects.push({ oid, size });
          } else {
            objects.push({
              oid,
              size,
              actions: {
                upload: action(href),
                verify: action(`${base}/${repo}/info/lfs/verify`),
              },
            });
          }
        }
        return json(200, { transfer: "basic", objects, hash_algo: "sha256" });
      }
      if (rest === "verify" && req.method === "POST") {
        const refused = refusal(repo, auth, true);
        if (refused) return refused;
        stats.verifies++;
        const { oid, size } = await req.json() as { oid: string; size: number };
        return (await sizeOf(repo, oid)) === size
          ? json(200, {})
          : json(404, { message: "Object does not exist" });
      }
      if (rest.startsWith("locks")) {
        stats.lockCalls++;
        const write = req.method !== "GET";
        const refused = refusal(repo, auth, write);
        if (refused) return refused;
        const owner = { name: (userOf(auth) as string | null) ?? "anonymous" };
        const shape = (l: { id: string; path: string; owner: string }) => ({
          id: l.id,
          path: l.path,
          locked_at: "2023-11-14T22:13:20Z",
          owner: { name: l.owner },
        });
        if (rest === "locks" && req.method === "GET") {
          return json(200, { locks: [...locks.values()].map(shape) });
        }
        if (rest === "locks" && req.method === "POST") {
          const { path } = await req.json() as { path: string };
          const lock = { id: String(nextLock++), path, owner: owner.name };
          locks.set(lock.id, lock);
          return json(201, { lock: shape(lock) });
        }
        if (rest === "locks/verify" && req.method === "POST") {
          await req.body?.cancel();
          const all = [...locks.values()];
          return json(200, {
            ours: all.filter((l) => l.owner === owner.name).map(shape),
            theirs: all.filter((l) => l.owner !== owner.name).map(shape),
          });
        }
        const unlock = /^locks\/([^/]+)\/unlock$/.exec(rest);
        if (unlock && req.method === "POST") {
          await req.body?.cancel();
          const lock = locks.get(unlock[1]);
          if (!lock) return json(404, { message: "no such lock" });
          locks.delete(unlock[1]);
          return json(200, { lock: shape(lock) });
        }
      }
      await req.body?.cancel();
      return json(404, { message: "not found" });
    }
    // Everything else is Git: to http-backend.
    const target = `${gitOrigin.url}${url.pathname}${url.search}`;
    return await fetch(target, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      redirect: "manual",
    });
  });
  let stopped: Promise<void> | undefined;
  const stop = () =>
    stopped ??= (async () => {
      await server.stop();
      await gitOrigin.stop();
      await Deno.remove(root, { recursive: true }).catch(() => {});
    })();
  return {
    url: server.url,
    git: gitOrigin,
    stats,
    resetStats: () => Object.assign(stats, fresh()),
    truncate,
    corrupt,
    garbage,
    anySize,
    delay,
    deleteObject: (repo, oid) => Deno.remove(objectPath(repo, oid)),
    hasObject: async (repo, oid) => (await sizeOf(repo, oid)) !== null,
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

/** git with git-lfs's filters configured (as `git lfs install` would, without touching HOME). */
export const LFS_GIT_ENV: Record<string, string> = {
  ...GIT_ENV,
  GIT_CONFIG_COUNT: "5",
  GIT_CONFIG_KEY_0: "filter.lfs.clean",
  GIT_CONFIG_VALUE_0: "git-lfs clean -- %f",
  GIT_CONFIG_KEY_1: "filter.lfs.smudge",
  GIT_CONFIG_VALUE_1: "git-lfs smudge -- %f",
  GIT_CONFIG_KEY_2: "filter.lfs.process",
  GIT_CONFIG_VALUE_2: "git-lfs filter-process",
  GIT_CONFIG_KEY_3: "filter.lfs.required",
  GIT_CONFIG_VALUE_3: "true",
  GIT_CONFIG_KEY_4: "credential.helper",
  GIT_CONFIG_VALUE_4: "",
};

/** Runs git with {@link LFS_GIT_ENV} in `cwd`. */
export function lfsGit(args: string[], cwd?: string, env: Record<string, string> = {}) {
  return git(args, { cwd, env: { ...LFS_GIT_ENV, ...env } });
}

/**
 * Creates repository `name` at `origin` holding `files` (path to bytes) tracked by LFS (`*.bin`),
 * pushed with git-lfs directly to the origin (as `user`, if given: `user:password`). Returns the
 * oids by path.
 */
export async function makeLfsRepo(
  origin: LfsOrigin,
  name: string,
  files: Record<string, Uint8Array>,
  user?: string,
): Promise<Record<string, string>> {
  await origin.git.createBare(name);
  const work = await Deno.makeTempDir({ prefix: "gitedge-lfs-work-" });
  try {
    await lfsGit(["init", "-q", "-b", "main", work]);
    await lfsGit(["lfs", "install", "--local"], work);
    await lfsGit(["lfs", "track", "*.bin"], work);
    const oids: Record<string, string> = {};
    for (const [path, bytes] of Object.entries(files)) {
      await Deno.mkdir(`${work}/${path}`.replace(/\/[^/]*$/, ""), { recursive: true });
      await Deno.writeFile(`${work}/${path}`, bytes);
      oids[path] = lfsOid(bytes);
    }
    await Deno.writeTextFile(`${work}/README`, `LFS fixture ${name}\n`);
    await lfsGit(["add", "-A"], work);
    await lfsGit(["commit", "-q", "-m", "LFS fixture"], work);
    const remote = withUser(`${origin.url}/${name}`, user);
    await lfsGit(["push", "-q", remote, "main"], work);
    return oids;
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}

/** `url` with `user` (`name:password`) as its userinfo. */
export function withUser(url: string, user?: string): string {
  if (!user) return url;
  const u = new URL(url);
  const at = user.indexOf(":");
  u.username = user.slice(0, at);
  u.password = user.slice(at + 1);
  return u.toString();
}
