/**
 * The last `capacity` published batches by sequence number, for replay requests (vLLM's
 * `deque(maxlen=buffer_steps)`): a ring, so memory stays bounded however long the server runs.
 * @module
 */

/** One published batch. */
export interface BufferedBatch {
  seq: bigint;
  payload: Uint8Array;
}

/** A bounded ring of batches with consecutive sequence numbers. */
export class ReplayBuffer {
  readonly capacity: number;
  readonly #ring: (BufferedBatch | undefined)[];
  #start = 0;
  #size = 0;

  constructor(capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`replay buffer capacity must be an integer >= 1, got ${capacity}`);
    }
    this.capacity = capacity;
    this.#ring = new Array(capacity);
  }

  /** Batches held now. */
  get size(): number {
    return this.#size;
  }

  /** Oldest sequence number held, or undefined when empty. */
  get oldestSeq(): bigint | undefined {
    return this.#size === 0 ? undefined : this.#ring[this.#start]!.seq;
  }

  /** Appends a batch, dropping the oldest when full; sequence numbers must follow each other. */
  push(seq: bigint, payload: Uint8Array): void {
    if (this.#size > 0) {
      const last = this.#ring[(this.#start + this.#size - 1) % this.capacity]!.seq;
      if (seq !== last + 1n) throw new RangeError(`replay buffer: batch ${seq} does not follow ${last}`);
    }
    if (this.#size === this.capacity) {
      this.#ring[this.#start] = { seq, payload };
      this.#start = (this.#start + 1) % this.capacity;
      return;
    }
    this.#ring[(this.#start + this.#size) % this.capacity] = { seq, payload };
    this.#size++;
  }

  /** Every held batch with a sequence number >= `startSeq`, oldest first. */
  *from(startSeq: bigint): Generator<BufferedBatch> {
    const oldest = this.oldestSeq;
    if (oldest === undefined) return;
    const skip = startSeq > oldest ? Number(startSeq - oldest) : 0;
    for (let i = skip; i < this.#size; i++) yield this.#ring[(this.#start + i) % this.capacity]!;
  }
}
