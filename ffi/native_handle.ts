/**
 * Base of the classes that own a native handle: idempotent dispose(), use after dispose throws.
 * It knows nothing of the library the handle came from; each subclass keeps its own reference
 * and says how to free the handle.
 * @module
 */
import { DisposedError } from "../lib/core/errors.ts";

/** A native object owned by TypeScript; subclasses say how to free it. */
export abstract class NativeHandle {
  #handle: bigint | null;
  constructor(
    handle: bigint,
    readonly kind: string,
  ) {
    this.#handle = handle;
  }
  /** The native handle; throws DisposedError after dispose(). */
  get handle(): bigint {
    if (this.#handle === null) throw new DisposedError(this.kind);
    return this.#handle;
  }
  protected abstract release(handle: bigint): void;
  /** Frees the native object; later calls do nothing. */
  dispose(): void {
    if (this.#handle === null) return;
    const h = this.#handle;
    this.#handle = null;
    this.release(h);
  }
  [Symbol.dispose](): void {
    this.dispose();
  }
}
