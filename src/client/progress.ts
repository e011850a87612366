/**
 * Progress events emitted while packfile URIs download. The module never prints; callers decide
 * how to show these (see `progress_view.ts` for the CLI's terminal view).
 */

interface ProgressBase {
  /** The advertised pack checksum (hex). */
  hash: string;
  /** Bytes of this pack received so far (on "done": the pack's size). */
  bytes: number;
  /** The pack's full size when the server told us, else undefined. */
  total?: number;
}

/**
 * A download started (first attempt).
 *
 * @example The first event of a pack
 * ```ts
 * const started: StartEvent = { type: "start", hash: "0123456789abcdef0123456789abcdef01234567", bytes: 0 };
 * ```
 */
export interface StartEvent extends ProgressBase {
  type: "start";
}

/**
 * More bytes arrived.
 *
 * @example A percentage, when the size is known
 * ```ts
 * function percent(event: ChunkEvent): number | null {
 *   return event.total ? Math.floor((100 * event.bytes) / event.total) : null;
 * }
 * ```
 */
export interface ChunkEvent extends ProgressBase {
  type: "progress";
}

/**
 * An attempt failed and another one follows after `delayMs`.
 *
 * @example What a retry says
 * ```ts
 * function retryLine(event: RetryEvent): string {
 *   const from = event.resume ? `resuming at ${event.bytes}` : "from the start";
 *   return `attempt ${event.attempt} in ${event.delayMs} ms, ${from}: ${event.reason}`;
 * }
 * ```
 */
export interface RetryEvent extends ProgressBase {
  type: "retry";
  /** The attempt that is about to start (2 for the first retry). */
  attempt: number;
  delayMs: number;
  /** Whether the next attempt continues at `bytes` (true) or starts over (false). */
  resume: boolean;
  /** Why the previous attempt failed (message only; URLs are redacted). */
  reason: string;
}

/**
 * The pack is indexed, verified and installed.
 *
 * @example Throughput of a finished pack
 * ```ts
 * function rate(event: DoneEvent): number {
 *   return event.bytes / event.seconds;
 * }
 * ```
 */
export interface DoneEvent extends ProgressBase {
  type: "done";
  seconds: number;
}

/**
 * Anything {@link fetchPackfiles}' `onProgress` callback receives.
 *
 * @example One line per event
 * ```ts
 * function describe(event: ProgressEvent): string {
 *   switch (event.type) {
 *     case "start":
 *       return `${event.hash}: started`;
 *     case "progress":
 *       return `${event.hash}: ${event.bytes} of ${event.total ?? "?"} bytes`;
 *     case "retry":
 *       return `${event.hash}: retry ${event.attempt} (${event.reason})`;
 *     case "done":
 *       return `${event.hash}: done in ${event.seconds} s`;
 *   }
 * }
 * ```
 */
export type ProgressEvent = StartEvent | ChunkEvent | RetryEvent | DoneEvent;
