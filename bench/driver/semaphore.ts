/**
 * A FIFO counting semaphore: the in-flight limit of a benchmark run. Waiters are served in the
 * order they asked, so a burst keeps its request order.
 * @module
 */

/** Limits how many holders run at once. */
export class Semaphore {
  #free: number;
  #waiters: (() => void)[] = [];

  constructor(readonly limit: number) {
    if (!(limit >= 1)) throw new RangeError(`semaphore limit must be >= 1 (or Infinity), got ${limit}`);
    this.#free = limit;
  }

  /** Resolves when a slot is held; call release() once when done. */
  acquire(): Promise<void> {
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Gives a slot back (to the oldest waiter, if any). */
  release(): void {
    const next = this.#waiters.shift();
    if (next) next();
    else this.#free++;
  }
}
