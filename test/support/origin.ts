/**
 * A real Git smart-HTTP origin for tests: a Deno.serve server running `git http-backend` as CGI
 * for every request, with optional Basic auth and byte counters.
 */
import { type CgiResponse, readCgiResponse } from "./cgi.ts";
import { git, GIT_ENV } from "./git.ts";
import { serveLoopback } from "./http_server.ts";
import { countingStream, TrafficCounter, type TrafficStats } from "./stats.ts";
import { encodeSegment } from "../../src/proxy/core/repo.ts";

/** Counters the origin keeps; `bytesIn` is request body bytes received (as sent, e.g. gzipped). */
export interface OriginStats extends TrafficStats {
  bytesIn: number;
  /**
   * Protocol-v2 upload-pack commands received, by name (`fetch`, `ls-refs`): `fetch` is the one
   * that makes the origin compute a pack; `fetch-probe` a fetch of nothing (every want also a
   * have, or no want), the edge's authorisation probe.
   */
  commands: Record<string, number>;
}

/** Options for {@link startOrigin}. */
export interface OriginOptions {
  /** Directory holding the bare repositories; a fresh temp dir (removed on stop) if omitted. */
  root?: string;
  /**
   * Require HTTP Basic auth with these credentials on every request (read on each request: a test
   * may change the password, as an origin revoking it).
   */
  requireAuth?: { user: string; password: string };
  /**
   * With `requireAuth`: `"fetch"` guards only protocol-v2 `fetch` commands (and receive-pack),
   * listing refs (`info/refs`, `ls-refs`) to anyone; default `"all"`.
   */
  authScope?: "all" | "fetch";
  /** The git whose `http-backend` serves (and that creates repositories); default `git`. */
  gitBin?: string;
  /**
   * Advertise bundle URIs (`uploadpack.advertiseBundleURIs`; git >= 2.40): new repositories get
   * the setting, and {@link Origin.publishBundle} gives them a bundle list.
   */
  bundleUris?: boolean;
}

/** A running origin. */
export interface Origin extends AsyncDisposable {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  url: string;
  /** Directory of bare repositories (GIT_PROJECT_ROOT). */
  root: string;
  stats: OriginStats;
  /** URL of repository `name` (a path relative to `root`, e.g. `x/y.git`). */
  repoUrl(name: string): string;
  /**
   * Creates an empty bare repository `name` configured for push and filters (SHA-256 with
   * `objectFormat: "sha256"`); returns its path.
   */
  createBare(name: string, opts?: { objectFormat?: "sha1" | "sha256" }): Promise<string>;
  /**
   * Bundles repository `name` as it is now (all refs) into a file this origin serves under
   * `/_bundles/`, and configures the repository's bundle list (`bundle.*`) to name it.
   */
  publishBundle(name: string): Promise<string>;
  /**
   * Kills running backends and stops the server, dropping its connections (it never waits on a
   * client to read); idempotent.
   */
  stop(): Promise<void>;
}

/** A repository name that is empty, absolute or escapes the origin root. */
export class InvalidRepoNameError extends Error {
  override name = "InvalidRepoNameError";
  constructor(readonly repoName: string) {
    super(`invalid repository name ${JSON.stringify(repoName)}: use a relative path without '..'`);
  }
}

/** `git http-backend` failed in a way that broke a response already under way. */
export class BackendError extends Error {
  override name = "BackendError";
  constructor(message: string, readonly stderr: string) {
    // Progress output repaints lines with \r: the last few lines say what went wrong.
    const tail = stderr.split(/[\r\n]+/).filter((l) => l.trim() !== "").slice(-3).join(" | ");
    super(tail ? `${message}: ${tail}` : message);
  }
}

class OriginCounter extends TrafficCounter implements OriginStats {
  bytesIn = 0;
  commands: Record<string, number> = {};
  override reset(): void {
    super.reset();
    this.bytesIn = 0;
    this.commands = {};
  }
}

/** Upload-pack requests are small: read them whole to count their command. */
const MAX_COUNTED_REQUEST = 1 << 20;

/**
 * The body of an upload-pack POST, read whole so its protocol-v2 command can be counted (gunzipped
 * for the count only; the backend gets the bytes as sent).
 */
async function countCommand(
  req: Request,
  stats: OriginCounter,
): Promise<{ req: Request; command: string | null }> {
  let command: string | null = null;
  const bytes = new Uint8Array(await req.arrayBuffer());
  if (bytes.byteLength <= MAX_COUNTED_REQUEST) {
    let plain = bytes;
    if (/gzip/i.test(req.headers.get("content-encoding") ?? "")) {
      const gunzip = new DecompressionStream("gzip") as unknown as TransformStream<
        Uint8Array,
        Uint8Array
      >;
      plain = new Uint8Array(
        await new Response(new Blob([bytes]).stream().pipeThrough(gunzip)).arrayBuffer(),
      );
    }
    const text = new TextDecoder().decode(plain);
    const m = /command=([a-z-]+)/.exec(text.slice(0, 4096));
    command = m?.[1] ?? null;
    // A fetch whose every want is also a have makes the origin compute no pack: the edge's
    // authorisation probe (src/proxy/origin/fetch_probe.ts), counted apart as `fetch-probe`.
    const wants = [...text.matchAll(/want ([0-9a-f]{40,64})/g)].map((w) => w[1]);
    const haves = new Set([...text.matchAll(/have ([0-9a-f]{40,64})/g)].map((h) => h[1]));
    // (A deepen or a shallow fetch may want what it has: it asks for more history, not less.)
    const deepens = /\n?[0-9a-f]{4}(deepen|shallow)[ -]/.test(text);
    const counted = command === "fetch" && !deepens && wants.every((w) => haves.has(w))
      ? "fetch-probe"
      : command;
    if (counted) stats.commands[counted] = (stats.commands[counted] ?? 0) + 1;
  }
  return {
    req: new Request(req.url, { method: req.method, headers: req.headers, body: bytes }),
    command,
  };
}

/** Starts an origin on 127.0.0.1 with an ephemeral port. */
export async function startOrigin(opts: OriginOptions = {}): Promise<Origin> {
  const ownsRoot = opts.root === undefined;
  const root = opts.root ?? await Deno.makeTempDir({ prefix: "gitedge-origin-" });
  const stats = new OriginCounter();
  const backends = new BackendSet();
  const gitBin = opts.gitBin ?? "git";
  // serveLoopback's stop() drops connections: a client holding a response unread (its bytes stuck
  // in socket buffers) cannot keep stop() waiting, as a graceful shutdown would.
  const server = serveLoopback((req, info) =>
    handle(req, info, {
      root,
      stats,
      backends,
      auth: opts.requireAuth,
      authScope: opts.authScope ?? "all",
      gitBin,
    })
  );
  const url = server.url;

  let stopped: Promise<void> | undefined;
  const stop = () =>
    stopped ??= (async () => {
      await backends.killAll();
      await server.stop();
      if (ownsRoot) await Deno.remove(root, { recursive: true });
    })();

  return {
    url,
    root,
    stats,
    repoUrl: (name) => `${url}/${checkName(name).split("/").map(encodeSegment).join("/")}`,
    createBare: (name, o) =>
      createBare(root, name, gitBin, opts.bundleUris ?? false, o?.objectFormat ?? "sha1"),
    publishBundle: (name) => publishBundle(root, url, name, gitBin),
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

async function createBare(
  root: string,
  name: string,
  bin: string,
  bundleUris: boolean,
  objectFormat: "sha1" | "sha256",
): Promise<string> {
  const path = `${root}/${checkName(name)}`;
  const init = ["init", "--quiet", "--bare", "--initial-branch=main"];
  await git([...init, `--object-format=${objectFormat}`, path], { bin });
  const config: [string, string][] = [
    ["http.receivepack", "true"],
    ["uploadpack.allowFilter", "true"],
    ["uploadpack.allowAnySHA1InWant", "true"],
  ];
  if (bundleUris) config.push(["uploadpack.advertiseBundleURIs", "true"]);
  for (const [key, value] of config) await git(["config", key, value], { cwd: path, bin });
  return path;
}

const BUNDLES = "_bundles";

async function publishBundle(
  root: string,
  url: string,
  name: string,
  bin: string,
): Promise<string> {
  const path = `${root}/${checkName(name)}`;
  const file = `${name.replaceAll("/", "_")}.bundle`;
  await Deno.mkdir(`${root}/${BUNDLES}`, { recursive: true });
  await git(["bundle", "create", `${root}/${BUNDLES}/${file}`, "--all"], { cwd: path, bin });
  const uri = `${url}/${BUNDLES}/${encodeURIComponent(file)}`;
  const config: [string, string][] = [
    ["bundle.version", "1"],
    ["bundle.mode", "all"],
    ["bundle.all.uri", uri],
  ];
  for (const [key, value] of config) await git(["config", key, value], { cwd: path, bin });
  return uri;
}

function checkName(name: string): string {
  const parts = name.split("/");
  if (name === "" || name.startsWith("/") || parts.some((p) => p === ".." || p === "")) {
    throw new InvalidRepoNameError(name);
  }
  return name;
}

/** The http-backend processes currently running, so stop() can end them. */
class BackendSet {
  private readonly running = new Set<Backend>();
  private closed = false;

  /** Registers a started backend; kills it at once if the origin is already stopping. */
  add(backend: Backend): void {
    this.running.add(backend);
    // Kept until its stderr is read too: a test's end must not leave that read pending.
    backend.settled.finally(() => this.running.delete(backend));
    if (this.closed) backend.kill();
  }

  /** Kills every running backend and waits for them to exit. */
  async killAll(): Promise<void> {
    this.closed = true;
    const backends = [...this.running];
    for (const backend of backends) backend.kill();
    await Promise.all(backends.map((b) => b.settled));
  }
}

interface HandlerContext {
  gitBin: string;
  root: string;
  stats: OriginCounter;
  backends: BackendSet;
  auth?: { user: string; password: string };
  authScope: "all" | "fetch";
}

async function handle(
  req: Request,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  ctx: HandlerContext,
): Promise<Response> {
  const url = new URL(req.url);
  const key = ctx.stats.request(req.method, url.pathname, req.headers);
  let command: string | null = null;
  if (req.method === "POST" && url.pathname.endsWith("/git-upload-pack")) {
    ({ req, command } = await countCommand(req, ctx.stats));
  }
  const user = ctx.auth ? authenticatedUser(req, ctx.auth) : undefined;
  // Guarding fetches only: listings (and v0/v1, whose POST is always a fetch) are open.
  const guarded = ctx.authScope === "all" || command === "fetch" ||
    url.pathname.endsWith("/git-receive-pack") ||
    (req.method === "POST" && command === null);
  if (ctx.auth && user === undefined && guarded) {
    return new Response("authentication required\n", {
      status: 401,
      headers: { "WWW-Authenticate": 'Basic realm="origin"' },
    });
  }
  if (url.pathname.startsWith(`/${BUNDLES}/`) && req.method === "GET") {
    return await serveBundle(ctx.root, url.pathname);
  }
  const backend = spawnBackend(req, cgiEnv(req, url, info, ctx.root, user), ctx.gitBin);
  ctx.backends.add(backend);
  // A client that goes away before the response is delivered must not leave a backend running.
  info.completed.catch(() => backend.kill());
  backend.feed(req.body, (n) => ctx.stats.bytesIn += n);

  let cgi: CgiResponse;
  try {
    cgi = await readCgiResponse(backend.child.stdout);
  } catch (e) {
    const stderr = await backend.finish().then(() => "", (err: BackendError) => err.stderr);
    return new Response(`http-backend failed: ${(e as Error).message}\n${stderr}`, { status: 500 });
  }
  const body = countingStream(
    finishing(cgi.body, backend.finish),
    (n) => ctx.stats.sent(key, n),
    () => backend.kill(),
  );
  return new Response(body, {
    status: cgi.status,
    statusText: cgi.statusText,
    headers: cgi.headers,
  });
}

function authenticatedUser(
  req: Request,
  auth: { user: string; password: string },
): string | undefined {
  const header = req.headers.get("authorization") ?? "";
  const m = /^Basic\s+(\S+)$/i.exec(header);
  if (!m) return undefined;
  let decoded: string;
  try {
    decoded = atob(m[1]);
  } catch {
    return undefined; // not base64: same as wrong credentials
  }
  return decoded === `${auth.user}:${auth.password}` ? auth.user : undefined;
}

function cgiEnv(
  req: Request,
  url: URL,
  info: Deno.ServeHandlerInfo<Deno.NetAddr>,
  root: string,
  user: string | undefined,
): Record<string, string> {
  const env: Record<string, string> = {
    ...GIT_ENV,
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: root,
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: "1",
    GIT_HTTP_MAX_REQUEST_BUFFER: "100M",
    GATEWAY_INTERFACE: "CGI/1.1",
    SERVER_PROTOCOL: "HTTP/1.1",
    REQUEST_METHOD: req.method,
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.replace(/^\?/, ""),
    REMOTE_ADDR: info.remoteAddr.hostname,
  };
  const optional: [string, string | null | undefined][] = [
    ["CONTENT_TYPE", req.headers.get("content-type")],
    ["CONTENT_LENGTH", req.headers.get("content-length")],
    ["HTTP_CONTENT_ENCODING", req.headers.get("content-encoding")],
    ["GIT_PROTOCOL", req.headers.get("git-protocol")],
    ["HTTP_GIT_PROTOCOL", req.headers.get("git-protocol")],
    ["REMOTE_USER", user],
  ];
  for (const [name, value] of optional) if (value) env[name] = value;
  return env;
}

interface Backend {
  child: Deno.ChildProcess;
  /** Streams the request body into the backend's stdin, counting bytes. */
  feed(body: ReadableStream<Uint8Array> | null, onBytes: (n: number) => void): void;
  /** Ends the backend (SIGTERM; git passes it on to its own children). */
  kill(): void;
  /** Resolves when the backend exited cleanly; rejects with {@link BackendError} otherwise. */
  finish(): Promise<void>;
  /** Settles once the process has exited and its stderr has been read to the end. */
  settled: Promise<unknown>;
}

/** A bundle file from {@link publishBundle}, whole (git's bundle download does not ask for ranges). */
async function serveBundle(root: string, pathname: string): Promise<Response> {
  const file = decodeURIComponent(pathname.slice(BUNDLES.length + 2));
  if (file.includes("/") || file.startsWith(".")) {
    return new Response("bad name\n", { status: 400 });
  }
  try {
    const data = await Deno.readFile(`${root}/${BUNDLES}/${file}`);
    return new Response(data, { headers: { "content-type": "application/octet-stream" } });
  } catch {
    return new Response("no such bundle\n", { status: 404 });
  }
}

function spawnBackend(req: Request, env: Record<string, string>, bin: string): Backend {
  const hasBody = req.body !== null;
  const child = new Deno.Command(bin, {
    args: ["http-backend"],
    env,
    clearEnv: true,
    stdin: hasBody ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = collectText(child.stderr, 8192);
  let feeding: Promise<void> = Promise.resolve();
  let finished: Promise<void> | undefined;
  let killed = false;
  return {
    child,
    settled: Promise.allSettled([child.status, stderr]),
    kill() {
      killed = true;
      try {
        child.kill("SIGTERM");
      } catch (e) {
        // Only "already exited" is expected here.
        if (!(e instanceof TypeError)) throw e;
      }
    },
    feed(body, onBytes) {
      if (!body) return;
      const counter = new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          onBytes(chunk.byteLength);
          controller.enqueue(chunk);
        },
      });
      feeding = body.pipeThrough(counter).pipeTo(child.stdin).catch((e) => {
        // The backend may answer (e.g. 404) without reading its input: that is not a failure.
        if (!(e instanceof Deno.errors.BrokenPipe)) throw e;
      });
    },
    finish() {
      return finished ??= (async () => {
        const [status, text] = await Promise.all([child.status, stderr]);
        try {
          await feeding;
        } catch (e) {
          throw new BackendError(`feeding the request body failed: ${(e as Error).message}`, text);
        }
        if (!status.success) {
          // Also when killed on purpose: a cut-off response must not end like a complete one.
          const why = killed ? "was stopped" : `exited with ${status.signal ?? status.code}`;
          throw new BackendError(`git http-backend ${why}`, text);
        }
      })();
    },
  };
}

/** Passes `body` through, then errors the stream if `finish` rejects once the body has ended. */
function finishing(
  body: ReadableStream<Uint8Array>,
  finish: () => Promise<void>,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read();
      if (!done) {
        controller.enqueue(value);
        return;
      }
      await finish();
      controller.close();
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

async function collectText(stream: ReadableStream<Uint8Array>, limit: number): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of stream) {
    if (text.length < limit) text += decoder.decode(chunk, { stream: true });
  }
  return text.slice(0, limit);
}
