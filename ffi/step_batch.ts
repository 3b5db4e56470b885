/**
 * The flat arrays of one forward step (see lp_step in csrc/include/lmpool.h). The model runner
 * preallocates them at their maximum sizes and passes views.
 * @module
 */

/** One step's batch metadata and outputs. */
export interface StepBatch {
  numSeqs: number;
  numTokens: number;
  tokenIds: Int32Array; // [numTokens]
  positions: Int32Array; // [numTokens]
  slotMapping: Int32Array; // [numTokens]
  queryStart: Int32Array; // [numSeqs + 1]
  contextLens: Int32Array; // [numSeqs]
  blockTables: Int32Array; // [numSeqs * maxBlocksPerSeq]
  maxBlocksPerSeq: number;
  numRows: number;
  sampleIndex: Int32Array; // [numRows] token indices whose logits are computed
  temperature: Float32Array; // [numRows]
  topK: Int32Array; // [numRows]
  topP: Float32Array; // [numRows]
  seed: BigUint64Array; // [numRows]
  outTokens: Int32Array; // [numRows]
  outLogprobs: Float32Array; // [numRows]
  outLogits?: Float32Array | null; // [numRows * vocab], tests only
}
