/**
 * Kept only for `edge_clone_test.ts` (being edited elsewhere); new code imports
 * `../support/assert.ts` directly.
 *
 * @module
 */
export { assert, assertEquals, assertRejects, assertThrows } from "../support/assert.ts";
