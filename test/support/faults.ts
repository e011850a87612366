/** Scripted failures for the test file server and relay: what each kind does, and who uses them up. */
import { piecewise } from "./streams.ts";
import { type Clock, realClock } from "./throttle.ts";

/** One kind of failure, applied to the next `times` requests for its path. */
export type Fault =
  /** Answer with this status instead of the content. */
  | { kind: "status"; status: number; times: number }
  /** Send `afterBytes` body bytes, then drop the connection. */
  | { kind: "truncate"; afterBytes: number; times: number }
  /** Flip (bitwise NOT) the byte at offset `atByte` of the resource, if the response covers it. */
  | { kind: "corrupt"; atByte: number; times: number }
  /** Send `afterBytes` body bytes, then pause `ms` before the rest. */
  | { kind: "stall"; afterBytes: number; ms: number; times: number }
  /** Answer a Range request with 200 and the whole body. */
  | { kind: "ignore-range"; times: number }
  /** Answer 416 even though the range is satisfiable. */
  | { kind: "bad-416"; times: number }
  /** Answer a Range request from one byte before the asked start, saying so (file server only). */
  | { kind: "wrong-range"; times: number }
  /** Answer 200 (or `status`) with this body instead of the content: an origin gone wrong. */
  | { kind: "body"; body: string | Uint8Array; status?: number; times: number }
  /** Serve as usual: lets the faults after it in a list hit later requests (a build's third). */
  | { kind: "pass"; times: number };

/**
 * Faults by URL path; `"*"` applies to any path without its own entry. A list is consumed in
 * order: each request takes the first fault with `times` left.
 */
export type FaultPlan = Record<string, Fault | Fault[]>;

/** The connection was dropped on purpose by a `truncate` fault. */
export class InjectedTruncation extends Error {
  override name = "InjectedTruncation";
  constructor(afterBytes: number) {
    super(`connection dropped after ${afterBytes} bytes (injected fault)`);
  }
}

/** Remaining faults per path; {@link FaultBook.next} consumes one per request. */
export class FaultBook {
  private remaining = new Map<string, { fault: Fault; left: number }[]>();

  constructor(plan: FaultPlan = {}) {
    this.set(plan);
  }

  /** Replaces the whole plan (counts start afresh). */
  set(plan: FaultPlan): void {
    this.remaining = new Map(
      Object.entries(plan).map(([path, f]) => [
        path,
        (Array.isArray(f) ? f : [f]).map((fault) => ({ fault, left: fault.times })),
      ]),
    );
  }

  /** Consumes and returns the fault for the next request to `path`, if any. */
  next(path: string): Fault | undefined {
    const list = this.remaining.get(path) ?? this.remaining.get("*") ?? [];
    const entry = list.find((e) => e.left > 0);
    if (!entry) return undefined;
    entry.left--;
    return entry.fault;
  }
}

/** Where a response body sits in its resource, for faults that act on it. */
export interface BodyPlacement {
  /** Resource offset of the body's first byte (the range start, or 0). */
  start: number;
  /** Whether the response declares Content-Length (then truncation can end the stream quietly). */
  lengthDeclared: boolean;
  /** Where stalls wait (default: real timers). */
  clock?: Clock;
}

/**
 * Applies a body fault (`truncate`, `corrupt`, `stall`) to `body`; other faults, or none, return
 * `body` unchanged. Pull-based: bytes are only read as the client takes them, and every pull
 * enqueues, closes or errors (a pull that does none of these would never be called again).
 */
export function applyBodyFault(
  body: ReadableStream<Uint8Array>,
  fault: Fault | undefined,
  placement: BodyPlacement,
): ReadableStream<Uint8Array> {
  if (!fault || !["truncate", "corrupt", "stall"].includes(fault.kind)) return body;
  let sent = 0;
  let stalled = false;
  return piecewise(body, async (rest, { controller, signal, cancelSource }) => {
    let chunk = rest;
    if (fault.kind === "stall" && !stalled) {
      if (sent >= fault.afterBytes) {
        stalled = true;
        await (placement.clock ?? realClock).sleep(fault.ms, signal);
      } else chunk = chunk.subarray(0, fault.afterBytes - sent);
    }
    if (fault.kind === "truncate") {
      if (sent >= fault.afterBytes) {
        await cancelSource();
        // With a declared length, ending early makes the server drop the connection quietly.
        if (placement.lengthDeclared) controller.close();
        else controller.error(new InjectedTruncation(fault.afterBytes));
        return 0;
      }
      chunk = chunk.subarray(0, fault.afterBytes - sent);
    }
    const used = chunk.byteLength;
    if (fault.kind === "corrupt") chunk = corrupted(chunk, fault.atByte - placement.start - sent);
    sent += chunk.byteLength;
    controller.enqueue(chunk);
    return used;
  });
}

/** A copy of `chunk` with the byte at `index` inverted, or `chunk` itself if out of range. */
function corrupted(chunk: Uint8Array, index: number): Uint8Array {
  if (index < 0 || index >= chunk.byteLength) return chunk;
  const copy = chunk.slice();
  copy[index] = ~copy[index] & 0xff;
  return copy;
}
