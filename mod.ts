/**
 * gitedge's client API: parallel packfile-URI downloads into a repository, and `clone`.
 *
 * @module
 */
export { DEFAULT_MAX_JOBS, fetchPackfiles, resolveJobs } from "./src/client/fetch_packfiles.ts";
export type { FetchPackfilesOptions } from "./src/client/fetch_packfiles.ts";
export type { PackfileResult } from "./src/client/packfile_download.ts";
export type { PackfileUri } from "./src/git/packfile_uris.ts";
export type {
  ChunkEvent,
  DoneEvent,
  ProgressEvent,
  RetryEvent,
  StartEvent,
} from "./src/client/progress.ts";
export { EdgeIndexError, indexUrlOf } from "./src/client/edge_index.ts";
export { runPool } from "./src/client/pool.ts";
export type { PoolOptions, PoolTask } from "./src/client/pool.ts";
export { clone, defaultDirectory } from "./src/client/clone.ts";
export type { CloneOptions, CloneProgress, CloneSummary } from "./src/client/clone.ts";
export { cloneMain, EXIT, exitCodeFor, parseCloneArgs } from "./src/client/clone_cli.ts";
export { CredentialManager, GitCredentialHelper } from "./src/client/credentials.ts";
export type { Credential, CredentialHelper } from "./src/client/credentials.ts";
export {
  AuthenticationError,
  CloneError,
  ConnectivityError,
  GitProcessError,
  HttpStatusError,
  IndexPackError,
  NetworkError,
  NotSmartHttpError,
  PackfileDownloadError,
  RangeMismatchError,
  StallError,
  TruncatedBodyError,
  UsageError,
  VerificationError,
} from "./src/client/errors.ts";
