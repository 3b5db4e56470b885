/**
 * The block set a consumer rebuilds from one stream's decoded events, checked as strictly as the
 * format allows: a stored run holds whole blocks only (`len(token_ids) == block_size * len(
 * block_hashes)`, llm-d's dense-span rule), of the expected block size and medium; its parent, when
 * set, was announced before it; no block is stored twice or removed unannounced. A violation is a
 * KvEventOrderError naming the batch, event and hash.
 * @module
 */
import type { DecodedBatch } from "./event_decoder.ts";

/** An event stream broke an ordering or completeness rule. */
export class KvEventOrderError extends Error {
  override readonly name = "KvEventOrderError";
  constructor(message: string) {
    super(message);
  }
}

/** What a stream promises (checked on every batch). */
export interface StreamExpectations {
  blockSize: number;
  /** data_parallel_rank every batch carries. */
  dataParallelRank: number;
  /** medium of every event (default "GPU"). */
  medium?: string;
}

/** One stream's blocks: wire hash -> that block's tokens. */
export class BlockSets {
  readonly blocks = new Map<bigint, number[]>();
  readonly #expect: StreamExpectations;
  /** Events applied, by type. */
  readonly counts = { BlockStored: 0, BlockRemoved: 0, AllBlocksCleared: 0 };

  constructor(expect: StreamExpectations) {
    this.#expect = expect;
  }

  /** Applies batch number `seq`; throws KvEventOrderError on a broken rule (the set is then undefined). */
  apply(seq: bigint, batch: DecodedBatch): void {
    const x = this.#expect;
    const medium = x.medium ?? "GPU";
    if (batch.dataParallelRank !== x.dataParallelRank) {
      throw new KvEventOrderError(
        `batch ${seq}: data_parallel_rank ${batch.dataParallelRank}, expected ${x.dataParallelRank}`,
      );
    }
    batch.events.forEach((e, i) => {
      const at = `batch ${seq} event ${i} (${e.type})`;
      this.counts[e.type]++;
      if (e.type === "AllBlocksCleared") {
        this.blocks.clear();
        return;
      }
      if (e.medium !== medium) throw new KvEventOrderError(`${at}: medium ${e.medium}, expected ${medium}`);
      if (e.type === "BlockRemoved") {
        for (const h of e.blockHashes) {
          if (!this.blocks.delete(h)) throw new KvEventOrderError(`${at}: removes ${hex(h)}, which is not stored`);
        }
        return;
      }
      if (e.blockSize !== x.blockSize) {
        throw new KvEventOrderError(`${at}: block_size ${e.blockSize}, expected ${x.blockSize}`);
      }
      if (e.blockHashes.length === 0) throw new KvEventOrderError(`${at}: no block hashes`);
      if (e.tokenIds.length !== e.blockSize * e.blockHashes.length) {
        throw new KvEventOrderError(
          `${at}: ${e.tokenIds.length} tokens for ${e.blockHashes.length} blocks of ${e.blockSize} (only full blocks)`,
        );
      }
      if (e.extraKeys !== null && e.extraKeys.length !== e.blockHashes.length) {
        throw new KvEventOrderError(`${at}: ${e.extraKeys.length} extra_keys for ${e.blockHashes.length} blocks`);
      }
      if (e.parentBlockHash !== null && !this.blocks.has(e.parentBlockHash)) {
        throw new KvEventOrderError(`${at}: parent ${hex(e.parentBlockHash)} was not announced before its child`);
      }
      e.blockHashes.forEach((h, j) => {
        if (this.blocks.has(h)) throw new KvEventOrderError(`${at}: stores ${hex(h)}, which is already stored`);
        this.blocks.set(h, e.tokenIds.slice(j * e.blockSize, (j + 1) * e.blockSize));
      });
    });
  }
}

function hex(h: bigint): string {
  return `0x${h.toString(16).padStart(16, "0")}`;
}
