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

/** What the command line asks of the refs: git clone's options that choose them. */
export interface RefChoice {
  /** `--branch`: a branch (or a tag, then detached) instead of the remote HEAD. */
  branch?: string;
  /** `--single-branch` (git's default with `--depth`): one branch, tags followed. */
  singleBranch?: boolean;
  /** `--no-tags`: no tags, now or in later fetches. */
  noTags?: boolean;
  /** `--revision`: one commit (a ref name or an object id), detached, no refs. */
  revision?: string;
}

/** Which refs a clone fetches and writes, and how its remote is configured. */
export interface ClonePlan {
  checkout: Checkout;
  /** Object ids the fetch asks for. */
  wants: string[];
  /** The remote's branches the clone writes (as remote-tracking refs, or as branches if bare). */
  branches: RemoteRef[];
  /** The remote's tags the clone writes. */
  tags: RemoteRef[];
  /** Tags the clone writes only if their object came along (single branch). */
  followTags: RemoteRef[];
  /** Whether the fetch asks for `include-tag` (git does for a single branch, `--no-tags` too). */
  includeTag: boolean;
  /** `remote.origin.fetch`, or null for none (`--revision`). */
  fetchRefspec: string | null;
}

/** The refs of a clone with `choice`, as git clone picks them. */
export function planClone(refs: RemoteRef[], choice: RefChoice, bare: boolean): ClonePlan {
  const heads = refs.filter((r) => r.oid !== null && r.name.startsWith("refs/heads/"));
  const allTags = refs.filter((r) => r.oid !== null && r.name.startsWith("refs/tags/"));
  if (choice.revision !== undefined) {
    const ref = resolveRevision(refs, choice.revision);
    const oid = ref?.oid ?? choice.revision.toLowerCase();
    return {
      checkout: { ref: null, oid: ref ? (ref.peeled ?? oid) : oid },
      wants: [oid],
      branches: [],
      tags: [],
      followTags: [],
      // No tags are written, but git still asks for them with a single branch (--depth).
      includeTag: choice.singleBranch ?? false,
      fetchRefspec: null,
    };
  }
  const checkout = chooseCheckout(refs, choice.branch);
  const tags = choice.noTags ? [] : allTags;
  // A bare clone configures no fetch refspec (as git).
  const defaultRefspec = bare ? null : "+refs/heads/*:refs/remotes/origin/*";
  if (!choice.singleBranch) {
    const branches = heads;
    return {
      checkout,
      wants: unique([...branches, ...tags]),
      branches,
      tags,
      followTags: [],
      includeTag: false,
      fetchRefspec: defaultRefspec,
    };
  }
  const head = checkout.ref === null ? null : heads.find((r) => r.name === checkout.ref) ?? null;
  const branches = head ? [head] : [];
  const tag = choice.branch !== undefined && head === null
    ? allTags.find((r) => r.name === `refs/tags/${choice.branch}`)
    : undefined;
  let fetchRefspec: string | null = null;
  if (bare) fetchRefspec = null;
  else if (head) fetchRefspec = `+${head.name}:refs/remotes/origin/${head.name.slice(11)}`;
  else if (tag) fetchRefspec = `+${tag.name}:${tag.name}`;
  return {
    checkout,
    wants: unique([...branches, ...(tag ? [tag] : [])]),
    branches,
    tags: tag ? [tag] : [],
    followTags: tags.filter((t) => t !== tag),
    includeTag: true,
    fetchRefspec,
  };
}

/** The remote ref `revision` names, as git resolves a name (`v1` → `refs/tags/v1`), or null for an object id. */
export function resolveRevision(refs: RemoteRef[], revision: string): RemoteRef | null {
  const byName = new Map(refs.filter((r) => r.oid !== null).map((r) => [r.name, r]));
  for (
    const name of [revision, `refs/${revision}`, `refs/tags/${revision}`, `refs/heads/${revision}`]
  ) {
    const ref = byName.get(name);
    if (ref) return ref;
  }
  if (/^([0-9a-f]{40}|[0-9a-f]{64})$/i.test(revision)) return null;
  throw new CloneError(`remote revision ${revision} not found in upstream origin`);
}

function unique(refs: RemoteRef[]): string[] {
  return [...new Set(refs.map((r) => r.oid!))];
}
