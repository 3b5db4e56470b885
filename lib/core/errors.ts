/**
 * Named errors that callers catch. Bad arguments use the built-in TypeError/RangeError.
 * @module
 */

/** A native library call failed; `status` is the C status code, the message comes from lp_last_error(). */
export class NativeError extends Error {
  override readonly name = "NativeError";
  constructor(
    message: string,
    readonly status: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The native library could not be found or opened; the message lists every path tried. */
export class NativeLibraryNotFoundError extends Error {
  override readonly name = "NativeLibraryNotFoundError";
  constructor(
    message: string,
    readonly tried: readonly string[],
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A request can never fit the KV cache (or the configured limits) and was rejected. */
export class CapacityError extends Error {
  override readonly name = "CapacityError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** The worker that held a request died; the request did not complete. */
export class WorkerDiedError extends Error {
  override readonly name = "WorkerDiedError";
  constructor(
    message: string,
    readonly rank: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A request was aborted by its caller (or its client disconnected). */
export class AbortedError extends Error {
  override readonly name = "AbortedError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** A handle (model, KV cache, engine) was used after dispose(). */
export class DisposedError extends Error {
  override readonly name = "DisposedError";
  constructor(what: string) {
    super(`${what} was used after dispose()`);
  }
}

/** A model directory is malformed: unknown architecture, missing tensor, bad config value. */
export class ModelFormatError extends Error {
  override readonly name = "ModelFormatError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/**
 * A structured-output constraint (JSON schema, regex, grammar, choice) that the grammar engine
 * cannot compile; the message is the engine's, `field` names where the constraint came from.
 */
export class GrammarError extends Error {
  override readonly name = "GrammarError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}
