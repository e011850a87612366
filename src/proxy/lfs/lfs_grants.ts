/**
 * What the origin's batch answers granted, kept in memory only for the fills they may start: per
 * (repository, oid, caller tag), the origin's download `href` and `header` (which may carry
 * short-lived credentials: never stored, never logged), for at most the lifetime of the edge URL
 * handed out for it. Bounded: the oldest grant is forgotten first. A fill that finds no grant
 * here (another process or Worker isolate handed out the URL, or it was forgotten) asks the
 * origin's batch API again with the caller's own credential.
 */

export interface OriginAction {
  href: string;
  header: Record<string, string>;
}

interface Grant extends OriginAction {
  /** When it may no longer be used (ms since epoch). */
  until: number;
}

export class LfsGrants {
  readonly #grants = new Map<string, Grant>();
  constructor(readonly maxEntries = 20_000) {}

  static key(repoId: string, oid: string, tag: string): string {
    return `${repoId}\n${oid}\n${tag}`;
  }

  remember(key: string, action: OriginAction, until: number): void {
    this.#grants.delete(key);
    this.#grants.set(key, { href: action.href, header: { ...action.header }, until });
    while (this.#grants.size > this.maxEntries) {
      this.#grants.delete(this.#grants.keys().next().value!);
    }
  }

  /** The grant under `key` still valid at `now` (ms), or undefined (an expired one is dropped). */
  get(key: string, now: number): OriginAction | undefined {
    const grant = this.#grants.get(key);
    if (!grant) return undefined;
    if (grant.until < now) {
      this.#grants.delete(key);
      return undefined;
    }
    return { href: grant.href, header: grant.header };
  }

  get size(): number {
    return this.#grants.size;
  }
}
