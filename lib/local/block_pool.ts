/**
 * The physical blocks of one KV cache: their state, generation, reference and pin counts, and the
 * free list. Knows nothing about hashes; the PrefixCache layers the hash -> block map on top.
 * @module
 */

/** Lifecycle of a physical block: Free -> Writing (or Reserved) -> Ready -> Free. */
export const BlockState = {
  /** On the free list. */
  Free: 0,
  /** Held by sequences; its K/V is not complete yet, so nobody else may reuse it. */
  Writing: 1,
  /** Its K/V is complete: shareable if it carries a registered hash, a prefix-cache entry at zero refs. */
  Ready: 2,
  /** Reserved for an incoming transfer: invisible until published. */
  Reserved: 3,
} as const;
/** One of BlockState's values. */
export type BlockStateValue = (typeof BlockState)[keyof typeof BlockState];

/** Name of a state, for messages. */
export function blockStateName(s: number): string {
  return ["Free", "Writing", "Ready", "Reserved"][s] ?? `unknown(${s})`;
}

/** Physical block bookkeeping as flat typed arrays, indexed by block id. */
export class BlockPool {
  readonly numBlocks: number;
  readonly state: Uint8Array;
  /** Bumped every time a block leaves the free list, so stale references to an old use are detectable. */
  readonly generation: Uint32Array;
  /** Sequences whose block table holds the block. */
  readonly refCount: Int32Array;
  /** Outgoing transfers reading the block; a pinned block is never reclaimed. */
  readonly pinCount: Int32Array;
  readonly #freeStack: Int32Array;
  #numFree: number;

  constructor(numBlocks: number) {
    if (!Number.isInteger(numBlocks) || numBlocks <= 0) {
      throw new RangeError(`numBlocks must be a positive integer, got ${numBlocks}`);
    }
    this.numBlocks = numBlocks;
    this.state = new Uint8Array(numBlocks);
    this.generation = new Uint32Array(numBlocks);
    this.refCount = new Int32Array(numBlocks);
    this.pinCount = new Int32Array(numBlocks);
    this.#freeStack = new Int32Array(numBlocks);
    // Low ids come out first, which keeps tests readable.
    for (let i = 0; i < numBlocks; i++) this.#freeStack[i] = numBlocks - 1 - i;
    this.#numFree = numBlocks;
  }

  get numFree(): number {
    return this.#numFree;
  }

  /** Ids on the free list (for invariant checks). */
  freeIds(): Int32Array {
    return this.#freeStack.subarray(0, this.#numFree);
  }

  /** Takes a free block into `state` with a new generation; -1 when none is free. */
  take(state: BlockStateValue): number {
    if (this.#numFree === 0) return -1;
    const b = this.#freeStack[--this.#numFree]!;
    this.state[b] = state;
    this.generation[b] = this.generation[b]! + 1;
    return b;
  }

  /** Returns a block with no references or pins to the free list. */
  release(b: number): void {
    if (this.state[b] === BlockState.Free) throw new Error(`block ${b} released twice`);
    if (this.refCount[b] !== 0 || this.pinCount[b] !== 0) {
      throw new Error(`block ${b} released with refCount=${this.refCount[b]} pinCount=${this.pinCount[b]}`);
    }
    this.state[b] = BlockState.Free;
    this.#freeStack[this.#numFree++] = b;
  }

  /** Throws a RangeError unless `b` is a block id of this pool. */
  checkId(b: number): void {
    if (!Number.isInteger(b) || b < 0 || b >= this.numBlocks) {
      throw new RangeError(`block id ${b} is outside 0..${this.numBlocks - 1}`);
    }
  }
}
