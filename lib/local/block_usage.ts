/**
 * How often and how recently each published block was used: the key of the reclamation order
 * (least frequently, then least recently used) and the usage figures reports carry to the control
 * plane. Recency is kept twice on purpose: `lastAccess` is host time, comparable across the workers
 * of one host, while `tick` is a per-manager counter that strictly increases, so two uses within one
 * clock reading still order and a stale reclaim candidate is recognised by its tick.
 * @module
 */
import type { ReclaimCandidate } from "./reclaim_order.ts";

/** Per-block use counts and recency, as flat arrays indexed by block id. */
export class BlockUsage {
  readonly #accessCount: Float64Array;
  readonly #lastAccess: Float64Array;
  readonly #tick: Float64Array;
  #clock = 0;

  /** Usage of `numBlocks` blocks, all zero. */
  constructor(numBlocks: number) {
    this.#accessCount = new Float64Array(numBlocks);
    this.#lastAccess = new Float64Array(numBlocks);
    this.#tick = new Float64Array(numBlocks);
  }

  /**
   * Starts a block's use as a fresh cache entry at `now`: one access, or `accesses` (0: a block no
   * request used here yet, reclaimed before every block one did).
   */
  begin(b: number, now: number, accesses = 1): void {
    this.#accessCount[b] = accesses;
    this.#lastAccess[b] = now;
    this.#tick[b] = ++this.#clock;
  }

  /** Records a use at `now`; `access` counts it as a new access (a prefix hit), not just a release. */
  touch(b: number, now: number, access: boolean): void {
    if (access) this.#accessCount[b]!++;
    this.#lastAccess[b] = now;
    this.#tick[b] = ++this.#clock;
  }

  /** Accesses of a block since it was last published. */
  accessCount(b: number): number {
    return this.#accessCount[b]!;
  }

  /** Host time (ms) of a block's last use. */
  lastAccess(b: number): number {
    return this.#lastAccess[b]!;
  }

  /** A reclaim candidate for block `b` keyed by its current usage. */
  candidate(b: number, generation: number): ReclaimCandidate {
    return { block: b, generation, accessCount: this.#accessCount[b]!, tick: this.#tick[b]! };
  }

  /** True when no use of the block was recorded since `c` was made (its key is still current). */
  unchangedSince(c: ReclaimCandidate): boolean {
    return this.#tick[c.block] === c.tick;
  }
}
