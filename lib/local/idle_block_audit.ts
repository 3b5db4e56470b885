/**
 * The leak check of an idle worker: with no request and no transfer plan holding blocks, every
 * block must be free or a reclaimable cache entry, and the block manager's invariants must hold.
 * Run on each transition to idle (it walks every block once).
 * @module
 */
import type { BlockManager } from "./block_manager.ts";

/** What the audits found so far. */
export class IdleBlockAudit {
  /** Blocks found still held at the last audit (a leak: should be 0). */
  leakedBlocks = 0;
  /** Audits whose invariant check failed. */
  invariantViolations = 0;

  /** Audits `blocks`, which nothing may hold now; returns the violated invariant's message, if any. */
  run(blocks: BlockManager): string | undefined {
    this.leakedBlocks = blocks.numLiveBlocks + blocks.numReservedBlocks;
    try {
      blocks.checkInvariants({ drained: true });
      return undefined;
    } catch (e) {
      this.invariantViolations++;
      return (e as Error).message;
    }
  }
}
