/** Every mutant `.ci/mutants.ts` runs, by area: one file each (add a new area as a file here). */
import type { Mutant } from "./mutant.ts";
import { SIGNED_URLS_MUTANTS } from "./signed_urls.ts";
import { AUTH_MEMO_MUTANTS } from "./auth_memo.ts";
import { RESPONSE_CACHE_MUTANTS } from "./response_cache.ts";
import { INCREMENTAL_FETCH_MUTANTS } from "./incremental_fetch.ts";
import { URI_ELIGIBILITY_MUTANTS } from "./uri_eligibility.ts";
import { EDGE_INDEX_MUTANTS } from "./edge_index.ts";
import { FRONT_MUTANTS } from "./front.ts";
import { BUILD_STEPS_MUTANTS } from "./build_steps.ts";
import { DOWNLOADS_MUTANTS } from "./downloads.ts";
import { REQUEST_BOUNDS_MUTANTS } from "./request_bounds.ts";
import { PLAIN_CLONES_MUTANTS } from "./plain_clones.ts";
import { LIMITS_MUTANTS } from "./limits.ts";
import { SELF_MUTANTS } from "./self.ts";
import { HOUSE_MUTANTS } from "./house.ts";
import { LFS_MUTANTS } from "./lfs.ts";
import { OPERATOR_ACCESS_MUTANTS } from "./operator_access.ts";
import { MIRROR_MUTANTS } from "./mirror.ts";
import { MIRROR_UPDATE_MUTANTS } from "./mirror_update.ts";
import { ACCESS_MUTANTS, PURGE_MUTANTS } from "./access.ts";
import { FLEET_MUTANTS } from "./fleet.ts";
import { FLEET_MERGE_MUTANTS } from "./fleet_merge.ts";
import { MIRROR_LAYERS_MUTANTS } from "./mirror_layers.ts";
import { WORKER_HEAP_MUTANTS } from "./worker_heap.ts";

export const MUTANTS: Mutant[] = [
  ...SIGNED_URLS_MUTANTS,
  ...AUTH_MEMO_MUTANTS,
  ...RESPONSE_CACHE_MUTANTS,
  ...INCREMENTAL_FETCH_MUTANTS,
  ...URI_ELIGIBILITY_MUTANTS,
  ...EDGE_INDEX_MUTANTS,
  ...FRONT_MUTANTS,
  ...BUILD_STEPS_MUTANTS,
  ...DOWNLOADS_MUTANTS,
  ...REQUEST_BOUNDS_MUTANTS,
  ...PLAIN_CLONES_MUTANTS,
  ...LIMITS_MUTANTS,
  ...SELF_MUTANTS,
  ...HOUSE_MUTANTS,
  ...LFS_MUTANTS,
  ...OPERATOR_ACCESS_MUTANTS,
  ...MIRROR_MUTANTS,
  ...MIRROR_UPDATE_MUTANTS,
  ...ACCESS_MUTANTS,
  ...PURGE_MUTANTS,
  ...FLEET_MUTANTS,
  ...FLEET_MERGE_MUTANTS,
  ...MIRROR_LAYERS_MUTANTS,
  ...WORKER_HEAP_MUTANTS,
];
