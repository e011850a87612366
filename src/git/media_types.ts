/** The media types of git's smart-HTTP upload-pack exchange (gitprotocol-http). */

/** The body of a `POST …/git-upload-pack`. */
export const UPLOAD_PACK_REQUEST_TYPE = "application/x-git-upload-pack-request";

/** The answer to a `POST …/git-upload-pack`. */
export const UPLOAD_PACK_RESULT_TYPE = "application/x-git-upload-pack-result";
