/**
 * A client's upload-pack request body as the edge reads it: decoded, capped in size, within the
 * parse budget and the body timeout; and the byte-level edits of a command request sent on as is.
 */
import type { ProxyContext } from "../core/context.ts";
import { ClientRequestError, RequestTooLargeError } from "../core/errors.ts";
import { concat, type Pkt, PktLineReader, pktSpans, pktText } from "../../git/pktline.ts";
import { isArg } from "../../git/command_request.ts";

/** A request body being read for parsing. */
export interface GuardedBody {
  stream: ReadableStream<Uint8Array>;
  /** The rest streams through to the origin: no cap, budget or timeout from here on. */
  passThrough(): void;
  /** Returns its bytes to the parse budget. */
  release(): void;
}

/**
 * The client's request body, gunzipped if need be, failing with a `ClientRequestError` past
 * `maxRequestBytes` (413), when the parse budget is spent (503), when it has not arrived whole
 * within the body timeout (408), or when it is not valid gzip (400, also after `passThrough`).
 */
export function requestBody(ctx: ProxyContext, request: Request): GuardedBody {
  const max = ctx.deps.config.maxRequestBytes;
  let body: ReadableStream<Uint8Array> = request.body ?? new Blob([]).stream();
  const enc = (request.headers.get("content-encoding") ?? "").toLowerCase();
  const gzip = enc === "gzip" || enc === "x-gzip";
  if (gzip) {
    body = body.pipeThrough(
      new DecompressionStream("gzip") as unknown as TransformStream<Uint8Array, Uint8Array>,
    );
  } else if (enc && enc !== "identity") {
    throw new ClientRequestError(`unsupported content-encoding ${enc}`, 415);
  }
  const seconds = ctx.deps.config.bodyTimeoutSeconds;
  const budget = ctx.parseBudget;
  const reader = body.getReader();
  let taken = 0;
  let guarded = true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ClientRequestError(`request body not received within ${seconds} s`, 408)),
      seconds * 1000,
    );
  });
  expired.catch(() => {});
  const refusal = (error: unknown): unknown => {
    clearTimeout(timer);
    reader.cancel().catch(() => {});
    if (!(error instanceof ClientRequestError) && gzip) {
      const detail = error instanceof Error ? error.message : String(error);
      error = new ClientRequestError(`request body is not valid gzip: ${detail}`, 400);
    }
    if (error instanceof ClientRequestError) {
      ctx.metrics.inc("gitedge_requests_refused_total", 1, { status: String(error.status) });
    }
    return error;
  };
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await (guarded ? Promise.race([reader.read(), expired]) : reader.read());
        if (next.done) {
          clearTimeout(timer);
          controller.close();
          return;
        }
        const n = next.value.byteLength;
        if (!guarded) {
          controller.enqueue(next.value);
          return;
        }
        if (taken + n > max) throw new RequestTooLargeError(`request body exceeds ${max} bytes`);
        if (!budget.take(n)) {
          throw new ClientRequestError(
            "the edge is parsing too many large requests at once; retry shortly",
            503,
          );
        }
        taken += n;
        controller.enqueue(next.value);
      } catch (error) {
        controller.error(refusal(error));
      }
    },
    cancel(reason) {
      clearTimeout(timer);
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
  const release = () => {
    clearTimeout(timer);
    budget.give(taken);
    taken = 0;
  };
  return {
    stream,
    passThrough: () => {
      guarded = false;
      release();
    },
    release,
  };
}

/**
 * Reads packets up to and including the next delimiter or flush (`toFlush`: the next flush),
 * erroring once `budget.left` bytes are used up.
 */
export async function readPkts(
  reader: PktLineReader,
  budget: { left: number; max: number },
  toFlush: boolean,
): Promise<Pkt[]> {
  const pkts: Pkt[] = [];
  for (;;) {
    const pkt = await reader.read();
    if (pkt === null) return pkts;
    budget.left -= pkt.type === "data" ? pkt.data.length + 4 : 4;
    if (budget.left < 0) throw new RequestTooLargeError(`request body exceeds ${budget.max} bytes`);
    pkts.push(pkt);
    if (pkt.type === "flush" || (pkt.type === "delim" && !toFlush)) return pkts;
  }
}

/**
 * A request's bytes less its argument lines (after the delimiter) of argument `keyword`, the rest
 * as sent (command_request.ts `withoutArgLines`: the same on parsed lines).
 */
export function withoutArg(request: Uint8Array, keyword: string): Uint8Array {
  const kept: Uint8Array[] = [];
  let args = false;
  let from = 0;
  for (const { pkt, start, end } of pktSpans(request)) {
    if (pkt.type === "delim") args = true;
    if (!args || pkt.type !== "data") continue;
    const line = pktText(pkt);
    if (isArg(line, keyword)) {
      kept.push(request.subarray(from, start));
      from = end;
    }
  }
  kept.push(request.subarray(from));
  return kept.length === 1 ? request : concat(kept);
}

/** `bytes` (already parsed: well formed) up to the end of the command request they start with. */
export function firstRequest(bytes: Uint8Array): Uint8Array {
  for (const { pkt, end } of pktSpans(bytes)) {
    if (pkt.type === "flush") return bytes.subarray(0, end);
  }
  return bytes;
}

/** `stream`, with each chunk also appended to `chunks` as it passes. */
export function recorded(
  stream: ReadableStream<Uint8Array>,
  chunks: Uint8Array[],
): ReadableStream<Uint8Array> {
  return stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        chunks.push(chunk);
        controller.enqueue(chunk);
      },
    }),
  );
}
