/** Choosing what a clone wants from the advertised refs and what HEAD becomes. */
import { CloneError } from "./errors.ts";
import type { RemoteRef } from "./upload_pack.ts";

/** Every branch and tag tip, deduplicated. */
export function wantedObjects(refs: RemoteRef[]): string[] {
  const oids = new Set<string>();
  for (const ref of refs) {
    if (ref.oid !== null && /^refs\/(heads|tags)\//.test(ref.name)) oids.add(ref.oid);
  }
  return [...oids];
}

/** What HEAD becomes: a branch (symbolic), a detached commit, or an unborn branch. */
export interface Checkout {
  /** `refs/heads/<b>` for a branch, null when detached. */
  ref: string | null;
  /** The commit to check out, null for an unborn branch. */
  oid: string | null;
}

export function chooseCheckout(refs: RemoteRef[], branch: string | undefined): Checkout {
  const byName = new Map(refs.map((r) => [r.name, r]));
  if (branch !== undefined) {
    const head = byName.get(`refs/heads/${branch}`);
    if (head?.oid) return { ref: head.name, oid: head.oid };
    const tag = byName.get(`refs/tags/${branch}`);
    if (tag?.oid) return { ref: null, oid: tag.peeled ?? tag.oid };
    throw new CloneError(`remote branch ${branch} not found in upstream origin`);
  }
  const head = byName.get("HEAD");
  if (head?.symrefTarget) {
    const target = byName.get(head.symrefTarget);
    return { ref: head.symrefTarget, oid: target?.oid ?? null };
  }
  if (head?.oid) return { ref: null, oid: head.oid };
  return { ref: null, oid: null };
}
