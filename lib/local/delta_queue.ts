/**
 * A single-consumer async queue: the engine loop pushes, one `for await` reader pulls. Used to turn
 * a request's deltas into an async iterator.
 * @module
 */

/** Push-side producer, pull-side async iterable; ends after close() or fail(). */
export class DeltaQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #head = 0;
  #waiter: ((r: IteratorResult<T>) => void) | null = null;
  #waiterReject: ((e: unknown) => void) | null = null;
  #closed = false;
  #error: unknown = undefined;
  #failed = false;

  push(item: T): void {
    if (this.#closed) return;
    if (this.#waiter) {
      const w = this.#waiter;
      this.#waiter = this.#waiterReject = null;
      w({ value: item, done: false });
    } else {
      this.#items.push(item);
    }
  }

  /** No more items: the reader finishes after draining. */
  close(): void {
    this.#closed = true;
    if (this.#waiter && this.#head >= this.#items.length) {
      const w = this.#waiter;
      this.#waiter = this.#waiterReject = null;
      w({ value: undefined, done: true });
    }
  }

  /** Ends the queue with an error the reader throws after draining. */
  fail(error: unknown): void {
    if (this.#closed) return;
    this.#failed = true;
    this.#error = error;
    this.#closed = true;
    if (this.#waiterReject) {
      const r = this.#waiterReject;
      this.#waiter = this.#waiterReject = null;
      r(error);
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#head < this.#items.length) {
      const value = this.#items[this.#head++]!;
      if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
        this.#items.splice(0, this.#head);
        this.#head = 0;
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.#failed) return Promise.reject(this.#error);
    if (this.#closed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.#waiter = resolve;
      this.#waiterReject = reject;
    });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return { next: () => this.next() };
  }
}
