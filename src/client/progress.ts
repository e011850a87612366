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

/** A download started (first attempt). */
export interface StartEvent extends ProgressBase {
  type: "start";
}

/** More bytes arrived. */
export interface ChunkEvent extends ProgressBase {
  type: "progress";
}

/** An attempt failed and another one follows after `delayMs`. */
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

/** The pack is indexed, verified and installed. */
export interface DoneEvent extends ProgressBase {
  type: "done";
  seconds: number;
}

/** Anything {@link fetchPackfiles}' `onProgress` callback receives. */
export type ProgressEvent = StartEvent | ChunkEvent | RetryEvent | DoneEvent;
