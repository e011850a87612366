/**
 * Where the client's `Authorization` comes from, in order: the `GITEDGE_AUTHORIZATION`
 * environment variable (a full header value), `user:password` in the repository URL, or
 * `git credential fill` once the server answers 401 (then `approve` on success, `reject` on a
 * second 401). Credentials are held in memory only and never printed.
 */
import { GitProcessError } from "./errors.ts";
import { runGit } from "./git_command.ts";

/**
 * A username and password pair.
 *
 * @example A credential for a helper to approve
 * ```ts
 * const credential: Credential = { username: "ci", password: "<token>" };
 * await new GitCredentialHelper().approve(new URL("https://edge.example/x/y.git"), credential);
 * ```
 */
export interface Credential {
  username: string;
  password: string;
}

/**
 * The `git credential` operations the client needs (an interface so tests can stub it).
 *
 * @example A helper that knows one credential (e.g. in tests)
 * ```ts
 * const fixed: CredentialHelper = {
 *   fill: (_url, username) => Promise.resolve({ username: username ?? "ci", password: "<token>" }),
 *   approve: () => Promise.resolve(),
 *   reject: () => Promise.resolve(),
 * };
 * ```
 */
export interface CredentialHelper {
  /** Asks git's helpers (or the terminal) for a credential; null when none is available. */
  fill(url: URL, username?: string): Promise<Credential | null>;
  approve(url: URL, credential: Credential): Promise<void>;
  reject(url: URL, credential: Credential): Promise<void>;
}

/**
 * {@link CredentialHelper} backed by `git credential`.
 *
 * @example Ask git's credential helpers
 * ```ts
 * const helper = new GitCredentialHelper();
 * const credential = await helper.fill(new URL("https://edge.example/x/y.git"));
 * if (credential) console.log(`as ${credential.username}`);
 * ```
 */
export class GitCredentialHelper implements CredentialHelper {
  /** `env` is added to git's environment (tests use it to pick a credential store). */
  constructor(readonly env: Record<string, string> = {}) {}

  async fill(url: URL, username?: string): Promise<Credential | null> {
    let output: string;
    try {
      output = await runGit(["credential", "fill"], {
        stdin: describe(url, { username }),
        env: this.env,
      });
    } catch (error) {
      // git exits non-zero when no helper answered and prompting is impossible or refused.
      if (error instanceof GitProcessError) return null;
      throw error;
    }
    const fields = new Map<string, string>();
    for (const line of output.split("\n")) {
      const eq = line.indexOf("=");
      if (eq > 0) fields.set(line.slice(0, eq), line.slice(eq + 1));
    }
    const user = fields.get("username");
    const password = fields.get("password");
    return user === undefined || password === undefined ? null : { username: user, password };
  }

  async approve(url: URL, credential: Credential): Promise<void> {
    await runGit(["credential", "approve"], { stdin: describe(url, credential), env: this.env });
  }

  async reject(url: URL, credential: Credential): Promise<void> {
    await runGit(["credential", "reject"], { stdin: describe(url, credential), env: this.env });
  }
}

/** The `git credential` input describing `url` (and optionally who). */
function describe(url: URL, who: Partial<Credential>): string {
  const lines = [
    `protocol=${url.protocol.replace(/:$/, "")}`,
    `host=${url.host}`,
    `path=${url.pathname.replace(/^\//, "")}`,
  ];
  if (who.username) lines.push(`username=${who.username}`);
  if (who.password) lines.push(`password=${who.password}`);
  return `${lines.join("\n")}\n\n`;
}

type Source = "none" | "env" | "url" | "helper";

/**
 * Tracks the credential in use for one repository and how to replace it after a 401.
 *
 * @example Credentials from the URL, else from git after a 401
 * ```ts
 * const credentials = new CredentialManager(
 *   "https://ci:secret@edge.example/x/y.git",
 *   Deno.env.get("GITEDGE_AUTHORIZATION"),
 *   new GitCredentialHelper(),
 * );
 * credentials.url.href; // "https://edge.example/x/y.git": no credential in it
 * const headers = credentials.authorization
 *   ? { authorization: credentials.authorization }
 *   : undefined;
 * ```
 */
export class CredentialManager {
  readonly #url: URL;
  readonly #helper: CredentialHelper;
  #authorization: string | undefined;
  #source: Source;
  #username: string | undefined;
  #helperCredential: Credential | null = null;
  #askedHelper = false;

  /**
   * `repoUrl` may carry `user:password@` (it is used as a Basic credential and stripped);
   * `envAuthorization` is `GITEDGE_AUTHORIZATION`'s value when set.
   */
  constructor(repoUrl: string, envAuthorization: string | undefined, helper: CredentialHelper) {
    const url = new URL(repoUrl);
    this.#helper = helper;
    this.#username = url.username ? decodeURIComponent(url.username) : undefined;
    const password = url.password ? decodeURIComponent(url.password) : undefined;
    url.username = "";
    url.password = "";
    this.#url = url;
    if (envAuthorization) {
      this.#authorization = envAuthorization;
      this.#source = "env";
    } else if (this.#username !== undefined && password !== undefined) {
      this.#authorization = basic({ username: this.#username, password });
      this.#source = "url";
    } else {
      this.#source = "none";
    }
  }

  /** The repository URL without credentials. */
  get url(): URL {
    return new URL(this.#url);
  }

  /** The `Authorization` header value to send, if any. */
  get authorization(): string | undefined {
    return this.#authorization;
  }

  /**
   * Called after a 401. Returns true when a new credential is ready to retry with. Fixed
   * credentials (environment or URL) are not replaced; a rejected helper credential is reported
   * to `git credential reject`.
   */
  async renew(): Promise<boolean> {
    if (this.#source === "env" || this.#source === "url") return false;
    if (this.#helperCredential) {
      await this.#helper.reject(this.#url, this.#helperCredential);
      this.#helperCredential = null;
      this.#authorization = undefined;
    }
    if (this.#askedHelper) return false;
    this.#askedHelper = true;
    const credential = await this.#helper.fill(this.#url, this.#username);
    if (credential === null) return false;
    this.#helperCredential = credential;
    this.#authorization = basic(credential);
    this.#source = "helper";
    return true;
  }

  /** Called after a request succeeded with the current credential. */
  async confirm(): Promise<void> {
    if (this.#helperCredential) {
      await this.#helper.approve(this.#url, this.#helperCredential);
      // Approve once; later requests reuse the credential silently.
      this.#helperCredential = null;
    }
  }
}

function basic({ username, password }: Credential): string {
  const bytes = new TextEncoder().encode(`${username}:${password}`);
  return `Basic ${btoa(String.fromCharCode(...bytes))}`;
}
