/** The version of gitedge, as `gitedge --version` prints it and the npm package is published. */
export const VERSION = "0.1.0";

/** The `agent=` capability the edge sends the origin for requests of its own. */
export const AGENT = `agent=gitedge/${VERSION}`;
