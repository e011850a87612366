/**
 * Talking to the origin: request building, typed failures, and the questions a snapshot build
 * asks before fetching (the object format, the tips).
 */
import type { OriginFetch } from "../core/deps.ts";
import type { OriginAuth, RepoRef } from "../core/repo.ts";
import { EdgeHttpError } from "../core/errors.ts";
import { replaceUrls } from "../../redact.ts";
import { GitFormatError } from "../../git/errors.ts";
import { PktLineReader } from "../../git/pktline.ts";
import { capabilityValue, readCapabilityAdvertisement } from "../../git/capabilities.ts";
import { serializeCommandRequest } from "../../git/command_request.ts";
import { parseLsRefsLine } from "../../git/ls_refs.ts";
import { hashLength, type ObjectFormat } from "../../git/object_id.ts";
import { AGENT } from "../../version.ts";
import { UPLOAD_PACK_REQUEST_TYPE, UPLOAD_PACK_RESULT_TYPE } from "../../git/media_types.ts";

/**
 * What a client may be told about an origin URL: the endpoint asked for (`info/refs`,
 * `git-upload-pack`, `git-receive-pack`), never the origin's address or its path (docs/security.md:
 * error bodies carry no internal URLs). The URL itself stays on the error, for logs.
 */
export function originEndpoint(url: string): string {
  let path: string;
  try {
    path = new URL(url).pathname;
  } catch {
    return "the repository";
  }
  const m = /\/(info\/refs|git-upload-pack|git-receive-pack)$/.exec(path);
  return m ? m[1] : "the repository";
}

/** A message of a lower layer (the runtime's fetch names the URL it failed on) without URLs. */
function withoutUrls(text: string): string {
  return replaceUrls(text, "<origin>");
}

/** The origin could not be reached (connection refused, DNS, reset): 502 to the client. */
export class OriginUnreachableError extends EdgeHttpError {
  override name = "OriginUnreachableError";
  /** What went wrong, as the client may see it. */
  readonly detail: string;
  constructor(readonly url: string, cause: unknown) {
    const detail = withoutUrls(cause instanceof Error ? cause.message : String(cause));
    super(`origin unreachable (${originEndpoint(url)}): ${detail}`, 502, { cause });
    this.detail = detail;
  }
}

/** The origin answered `originStatus`, not success: 502 to the client. */
export class OriginStatusError extends EdgeHttpError {
  override name = "OriginStatusError";
  constructor(readonly url: string, readonly originStatus: number, readonly detail: string) {
    super(
      `origin answered ${originStatus} to ${originEndpoint(url)}${detail ? `: ${detail}` : ""}`,
      502,
    );
  }
}

/**
 * The origin answered 200 but its answer was unusable: cut short (the connection broke, or the
 * answer ended before its final flush) or malformed (not pkt-lines, not the protocol, a bad
 * pack). The origin's fault, so 502 to the client, saying what the origin did.
 */
export class OriginAnswerError extends EdgeHttpError {
  override name = "OriginAnswerError";
  constructor(readonly url: string, readonly detail: string, options?: ErrorOptions) {
    super(`origin's answer to ${originEndpoint(url)} ${detail}`, 502, options);
  }
}

/**
 * The origin answered with a redirect. The edge never follows one: a redirect may point at a host
 * the edge must not reach (it is no open proxy) and would carry the client's credentials there.
 * Git sees a 502 saying so; point the edge at the final URL instead.
 */
export class OriginRedirectError extends EdgeHttpError {
  override name = "OriginRedirectError";
  constructor(readonly url: string, readonly originStatus: number) {
    super(
      `origin answered ${originStatus} (a redirect) to ${originEndpoint(url)}; the edge does not ` +
        `follow origin redirects: configure the origin's final URL`,
      502,
    );
  }
}

/**
 * Runs `work`, which parses the origin's answer to `url`: wire data that does not parse is the
 * origin's failure, an {@link OriginAnswerError} (502), not the client's (400).
 */
export async function readingOrigin<T>(url: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw asOriginFailure(url, error);
  }
}

/** `error`, met parsing the origin's answer to `url`, as the origin's failure where it is one. */
export function asOriginFailure(url: string, error: unknown): unknown {
  if (error instanceof EdgeHttpError) return error;
  if (error instanceof GitFormatError) {
    return new OriginAnswerError(url, `is malformed: ${error.message}`, { cause: error });
  }
  return error;
}

/**
 * The origin's response body, its read failures (the connection broke mid-answer: Deno's
 * "error reading a body from connection", workerd's "Network connection lost") turned into
 * {@link OriginAnswerError}s, whoever reads it.
 */
function guardedBody(url: string, body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (error) {
        const detail = error instanceof Error ? error.message : String(error);
        throw new OriginAnswerError(url, `was cut short: ${withoutUrls(detail)}`, {
          cause: error,
        });
      }
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    cancel: (reason) => reader.cancel(reason),
  }, { highWaterMark: 0 });
}

/** Request headers a client may send that the origin needs; everything else stays at the edge. */
const FORWARDED_REQUEST_HEADERS = [
  "authorization",
  "git-protocol",
  "content-type",
  "accept",
  "user-agent",
  "accept-language",
];

/**
 * Response headers of the origin that reach the client. Not `content-encoding`: fetch hands us
 * the body already decoded, in Deno and in Workers alike.
 */
export const FORWARDED_RESPONSE_HEADERS = [
  "content-type",
  "cache-control",
  "expires",
  "pragma",
  "www-authenticate",
];

/** The headers of `incoming` that go to the origin. */
export function forwardHeaders(incoming: Headers): Headers {
  const out = new Headers();
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const v = incoming.get(name);
    if (v !== null) out.set(name, v);
  }
  return out;
}

/** The credential-bearing headers of a request, for a background build (memory only). */
export function authOf(incoming: Headers): OriginAuth {
  const headers: Record<string, string> = {};
  const v = incoming.get("authorization");
  if (v !== null) headers["authorization"] = v;
  return { headers };
}

/**
 * Calls the origin, turning network failures into `OriginUnreachableError` and redirects (never
 * followed) into `OriginRedirectError`.
 */
export async function callOrigin(
  originFetch: OriginFetch,
  url: string,
  init: RequestInit,
): Promise<Response> {
  let res: Response;
  try {
    res = await originFetch(new Request(url, { ...init, redirect: "manual" }));
  } catch (err) {
    throw new OriginUnreachableError(url, err);
  }
  if (res.status >= 300 && res.status < 400 && res.status !== 304) {
    await res.body?.cancel().catch(() => {});
    throw new OriginRedirectError(url, res.status);
  }
  if (!res.body || [101, 204, 205, 304].includes(res.status)) return res;
  return new Response(guardedBody(url, res.body), {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
  });
}

/** POSTs a protocol-v2 command to the origin's upload-pack and requires a 200. */
export async function postUploadPack(
  originFetch: OriginFetch,
  repo: RepoRef,
  auth: OriginAuth,
  body: Uint8Array,
): Promise<Response> {
  const url = `${repo.originUrl}/git-upload-pack`;
  const res = await callOrigin(originFetch, url, {
    method: "POST",
    headers: {
      ...auth.headers,
      "content-type": UPLOAD_PACK_REQUEST_TYPE,
      "accept": UPLOAD_PACK_RESULT_TYPE,
      "git-protocol": "version=2",
    },
    body: body as Uint8Array<ArrayBuffer>,
  });
  if (res.status !== 200) {
    throw new OriginStatusError(url, res.status, await headOfBody(res, 200));
  }
  return res;
}

/** GETs the origin's protocol-v2 upload-pack advertisement; requires a 200. */
export async function getUploadPackAdvertisement(
  originFetch: OriginFetch,
  repo: RepoRef,
  auth: OriginAuth,
): Promise<Response> {
  const url = `${repo.originUrl}/info/refs?service=git-upload-pack`;
  const res = await callOrigin(originFetch, url, {
    method: "GET",
    headers: { ...auth.headers, "git-protocol": "version=2" },
  });
  if (res.status !== 200) {
    throw new OriginStatusError(url, res.status, await headOfBody(res, 200));
  }
  return res;
}

/** The first `max` bytes of a response body as text; the rest is discarded unread. */
async function headOfBody(res: Response, max: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  try {
    const { value } = await reader.read();
    return value ? new TextDecoder().decode(value.subarray(0, max)).trim() : "";
  } catch {
    return "";
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** The origin's object format and the capability lines that say so. */
export interface OriginFormat {
  format: ObjectFormat;
  capabilities: string[];
}

/**
 * The origin's object format, from its v2 advertisement, and the capability lines requests
 * must carry for it (`object-format=` only where advertised: older servers refuse it).
 */
export async function originFormat(
  originFetch: OriginFetch,
  repo: RepoRef,
  auth: OriginAuth,
): Promise<OriginFormat> {
  const res = await getUploadPackAdvertisement(originFetch, repo, auth);
  const url = `${repo.originUrl}/info/refs`;
  const reader = new PktLineReader(res.body!);
  try {
    const adv = await readingOrigin(url, () => readCapabilityAdvertisement(reader));
    const value = capabilityValue(adv, "object-format");
    if (value !== undefined && value !== "sha1" && value !== "sha256") {
      throw new OriginAnswerError(url, `names object format ${value}, which the edge lacks`);
    }
    const format: ObjectFormat = value === "sha256" ? "sha256" : "sha1";
    return { format, capabilities: value ? [AGENT, `object-format=${value}`] : [AGENT] };
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/** The origin's branches and tags (peeled), by `ls-refs`: ref name to object id. */
export async function listTips(
  originFetch: OriginFetch,
  repo: RepoRef,
  auth: OriginAuth,
  origin: OriginFormat,
): Promise<Record<string, string>> {
  const body = serializeCommandRequest({
    command: "ls-refs",
    capabilities: origin.capabilities,
    args: ["peel", "ref-prefix refs/heads/", "ref-prefix refs/tags/"],
  });
  const res = await postUploadPack(originFetch, repo, auth, body);
  const url = `${repo.originUrl}/git-upload-pack`;
  const reader = new PktLineReader(res.body!);
  const tips: Record<string, string> = {};
  try {
    await readingOrigin(url, async () => {
      for (;;) {
        const pkt = await reader.read();
        // An ls-refs answer always ends with a flush: without one it was cut short, and tips
        // missing from it would publish a snapshot short of refs (or an empty one).
        if (pkt === null) {
          throw new OriginAnswerError(url, "(ls-refs) ended before its flush: it was cut short");
        }
        if (pkt.type === "flush" || pkt.type === "response-end") break;
        if (pkt.type !== "data") continue;
        const line = parseLsRefsLine(new TextDecoder().decode(pkt.data).replace(/\n$/, ""));
        if (line.oid && line.oid.length === hashLength(origin.format) * 2) {
          tips[line.name] = line.oid;
        }
      }
    });
  } finally {
    await reader.cancel().catch(() => {});
  }
  return tips;
}

/**
 * Whether some object `previousTips` reach is no longer reachable from `tips` at the origin (a
 * ref deleted, or moved other than fast-forward, and what only it reached gone or going): then a
 * refresh must not layer on the packs built for `previousTips`, which would go on serving those
 * objects. Asked as a fetch of the old tips with the new ones as haves: the origin's pack header
 * says how many objects the old tips reach beyond the new ones (none when every old tip is an
 * ancestor of a new one), and only the header is read. An old tip the origin no longer has (an
 * `ERR`), or any answer but such a header, counts as orphaned: the refresh is a full build.
 */
export async function orphanedSince(
  originFetch: OriginFetch,
  repo: RepoRef,
  auth: OriginAuth,
  origin: OriginFormat,
  previousTips: readonly string[],
  tips: readonly string[],
): Promise<boolean> {
  const now = new Set(tips);
  const gone = [...new Set(previousTips)].filter((t) => !now.has(t));
  if (gone.length === 0) return false;
  const body = serializeCommandRequest({
    command: "fetch",
    capabilities: origin.capabilities,
    args: [
      "no-progress",
      ...gone.map((t) => `want ${t}`),
      ...[...now].map((t) => `have ${t}`),
      "done",
    ],
  });
  let res: Response;
  try {
    res = await postUploadPack(originFetch, repo, auth, body);
  } catch {
    return true;
  }
  const reader = new PktLineReader(res.body!);
  try {
    const first = await reader.read();
    if (first?.type !== "data" || new TextDecoder().decode(first.data) !== "packfile\n") {
      return true;
    }
    let head = new Uint8Array(0);
    while (head.length < 12) {
      const pkt = await reader.read();
      if (pkt?.type !== "data" || pkt.data.length === 0) return true;
      const band = pkt.data[0];
      if (band === 2) continue;
      if (band !== 1) return true;
      const joined = new Uint8Array(head.length + pkt.data.length - 1);
      joined.set(head);
      joined.set(pkt.data.subarray(1), head.length);
      head = joined;
    }
    if (new TextDecoder().decode(head.subarray(0, 4)) !== "PACK") return true;
    const objects = new DataView(head.buffer, head.byteOffset + 8, 4).getUint32(0);
    return objects > 0;
  } catch {
    return true;
  } finally {
    await reader.cancel().catch(() => {});
  }
}
