/** The client's version, as `gitedge --version` and `gitedge clone --version` print it. */
export const VERSION = "0.1.0";
