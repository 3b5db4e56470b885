// Shared helpers of the local engine's unit tests: sequences and simulated steps without a model.
import { resolveSamplingParams, type SamplingParams } from "../../../lib/core/sampling_params.ts";
import { Sequence } from "../../../lib/core/sequence.ts";
import type { BlockManager } from "../../../lib/local/block_manager.ts";

let next = 0;

/** A greedy sequence over `tokens`. */
export function makeSeq(
  tokens: number[],
  blockSize: number,
  opts: { salt?: string; id?: string; params?: Partial<SamplingParams> } = {},
): Sequence {
  return new Sequence({
    requestId: opts.id ?? `r${next++}`,
    promptTokenIds: tokens,
    params: resolveSamplingParams({ maxTokens: 4, temperature: 0, ...opts.params }),
    blockSize,
    cacheSalt: opts.salt,
  });
}

/** 0, 1, 2, ... n-1 shifted by `from`. */
export function range(n: number, from = 0): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

/** Admits `seq` with its prefix hits and computes its whole prompt as one step; false when it does not fit. */
export function prefill(bm: BlockManager, seq: Sequence): boolean {
  const cached = bm.lookupPrefix(seq);
  const n = seq.numTokens - cached.length * bm.blockSize;
  if (!bm.allocateSlots(seq, n, cached)) return false;
  seq.numComputedTokens += n;
  bm.commitComputed(seq);
  return true;
}
