/**
 * The LMPool version the server reports at GET /version (kept equal to package.json's by a test).
 * @module
 */

/** LMPool's version. */
export const LMPOOL_VERSION = "0.1.0";
