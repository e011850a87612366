/**
 * Which credentials the origin accepted for a repository, recently: what lets the edge answer a
 * fetch from its snapshot without asking the origin again.
 *
 * Only a salted SHA-256 of (repository id, `Authorization` header) is kept, in memory, never the
 * credential, never in any store. The salt is random per instance, so a memo is useless outside
 * the process (or Worker isolate) that made it. "No credentials" is a credential like any other:
 * an anonymous request the origin answered with 200 makes the repository public for the TTL.
 *
 * Freshness: an entry is renewed every time the origin answers 200 to a request of the
 * upload-pack service with that credential (`info/refs`, `ls-refs`, `fetch`), and lapses the TTL (`EdgeConfig.authTtlSeconds`)
 * after the last such answer. Revocation at the origin therefore reaches the edge's own answers
 * within the TTL at most; every clone's ref advertisement still goes to the origin, so a revoked
 * credential fails there at once.
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { toHex } from "../../git/object_id.ts";

export class AuthMemo {
  readonly #maxEntries: number;
  /** Drawn on first use: Workers allow no random values in global scope, where this is made. */
  #salt: Uint8Array | null = null;
  /** key → time of the origin's last acceptance (ms); insertion order is age order. */
  readonly #accepted = new Map<string, number>();

  /** One memo per process or isolate; it outlives the apps built per request on Workers. */
  constructor(maxEntries = 10_000) {
    this.#maxEntries = maxEntries;
  }

  /** The memo key of `authorization` (null: anonymous) for repository `repoId`. */
  key(repoId: string, authorization: string | null): string {
    const salt = this.#salt ??= crypto.getRandomValues(new Uint8Array(32));
    const text = new TextEncoder().encode(`${repoId}\n${authorization ?? ""}\n`);
    const input = new Uint8Array(salt.length + text.length);
    input.set(salt);
    input.set(text, salt.length);
    const digest = sha256(input);
    return toHex(digest);
  }

  /** Records that the origin accepted the credential behind `key` at `now` (ms). */
  remember(key: string, now: number): void {
    this.#accepted.delete(key);
    this.#accepted.set(key, now);
    while (this.#accepted.size > this.#maxEntries) {
      this.#accepted.delete(this.#accepted.keys().next().value!);
    }
  }

  /** Whether the origin accepted the credential behind `key` within `ttlMs` before `now`. */
  accepted(key: string, now: number, ttlMs: number): boolean {
    const at = this.#accepted.get(key);
    if (at === undefined) return false;
    if (now - at < ttlMs && now >= at) return true;
    this.#accepted.delete(key);
    return false;
  }

  /** Forgets the credential behind `key` (the origin refused it). */
  forget(key: string): void {
    this.#accepted.delete(key);
  }
}
