/**
 * One forward step's batch: the flat arrays the model runner fills ({@link StepBatch}) and their
 * packing into the C struct lp_step_batch (csrc/include/lmpool.h) that lp_step, lp_step_launch and
 * lp_step_launch_sampling take. The field table below is the one statement of that struct on the TypeScript side; a
 * native test holds it against lp_step_batch_layout(), the compiler's own offsets.
 * @module
 */
import { addressOf } from "./dlopen.ts";

/** One step's batch metadata and outputs. The model runner preallocates the arrays at their maximum sizes and passes views. */
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
  /** Stride of outTopTokenIds / outTopLogprobs; 0 when no row asks for top logprobs. */
  maxTopLogprobs?: number;
  /**
   * 1: lp_step_launch runs the forward pass only, and lp_step_launch_sampling samples (with the
   * controls filled in meanwhile); absent or 0: one launch does both.
   */
  deferSampling?: number;
  /** Sampling controls (lp_step in lmpool.h); an absent array turns its control off for every row. */
  minP?: Float32Array | null; // [numRows] 0: off
  presencePenalty?: Float32Array | null; // [numRows]
  frequencyPenalty?: Float32Array | null; // [numRows]
  repetitionPenalty?: Float32Array | null; // [numRows] 1: off
  penaltyStart?: Int32Array | null; // [numRows + 1] row r's entries: [start[r], start[r + 1])
  penaltyTokenIds?: Int32Array | null; // distinct tokens of prompt and output, per row
  penaltyCounts?: Int32Array | null; // occurrences in the output (0: prompt only)
  biasStart?: Int32Array | null; // [numRows + 1]
  biasTokenIds?: Int32Array | null;
  biasValues?: Float32Array | null;
  allowedStart?: Int32Array | null; // [numRows + 1]
  allowedTokenIds?: Int32Array | null;
  bannedStart?: Int32Array | null; // [numRows + 1]
  bannedTokenIds?: Int32Array | null;
  scoreTokenIds?: Int32Array | null; // [numRows] -1: sample; else the row scores this token
  topLogprobs?: Int32Array | null; // [numRows] k per row, <= maxTopLogprobs
  outTopTokenIds?: Int32Array | null; // [numRows * maxTopLogprobs]
  outTopLogprobs?: Float32Array | null; // [numRows * maxTopLogprobs]
  outRanks?: Int32Array | null; // [numRows] a scored row's token rank (count of logits >= its own); else 0
}

/** The array sizes of a {@link StepBatch}. */
export interface StepBatchCapacity {
  tokens: number;
  seqs: number;
  maxBlocksPerSeq: number;
  /** Sampled rows; one per sequence unless given. */
  rows?: number;
}

/**
 * A batch whose arrays hold `capacity` elements, all zero, with zero counts for the caller to set
 * as it fills them: the one place a StepBatch's arrays are sized.
 */
export function allocateStepBatch(capacity: StepBatchCapacity): StepBatch {
  const { tokens, seqs, maxBlocksPerSeq } = capacity;
  const rows = capacity.rows ?? seqs;
  return {
    numSeqs: 0,
    numTokens: 0,
    tokenIds: new Int32Array(tokens),
    positions: new Int32Array(tokens),
    slotMapping: new Int32Array(tokens),
    queryStart: new Int32Array(seqs + 1),
    contextLens: new Int32Array(seqs),
    blockTables: new Int32Array(seqs * maxBlocksPerSeq),
    maxBlocksPerSeq,
    numRows: 0,
    sampleIndex: new Int32Array(rows),
    temperature: new Float32Array(rows),
    topK: new Int32Array(rows),
    topP: new Float32Array(rows),
    seed: new BigUint64Array(rows),
    outTokens: new Int32Array(rows),
    outLogprobs: new Float32Array(rows),
  };
}

type CountKey = "numSeqs" | "numTokens" | "maxBlocksPerSeq" | "numRows" | "maxTopLogprobs" | "deferSampling";
type ArrayKey = Exclude<keyof StepBatch, CountKey>;

/** A count field: an int32 in C. */
interface CountField {
  readonly c: string;
  readonly key: CountKey;
}

/** A pointer field: the array's address, or NULL for an array the counts leave unread. */
interface ArrayField {
  readonly c: string;
  readonly key: ArrayKey;
  /** Elements the native step reads from it, given the counts and the vocabulary size. */
  readonly needs: (b: StepBatch, vocab: number) => number;
  /** An absent optional array is passed as NULL (the step then skips that output). */
  readonly optional?: boolean;
}

const tokens = (b: StepBatch) => b.numTokens;
const rows = (b: StepBatch) => b.numRows;
const rowStarts = (b: StepBatch) => (b.numRows > 0 ? b.numRows + 1 : 0);
/** Entries of a control list: its start array's last value (the packer checks that array first). */
const entries = (start: "penaltyStart" | "biasStart" | "allowedStart" | "bannedStart") => (b: StepBatch) =>
  b.numRows > 0 && b[start] ? b[start]![b.numRows] ?? 0 : 0;
const topEntries = (b: StepBatch) => b.numRows * (b.maxTopLogprobs ?? 0);

/** lp_step_batch's int32 counts, in declaration order (they come first). */
const COUNT_FIELDS: readonly CountField[] = [
  { c: "num_seqs", key: "numSeqs" },
  { c: "num_tokens", key: "numTokens" },
  { c: "max_blocks_per_seq", key: "maxBlocksPerSeq" },
  { c: "num_rows", key: "numRows" },
  { c: "max_top_logprobs", key: "maxTopLogprobs" },
  { c: "defer_sampling", key: "deferSampling" },
];

/** lp_step_batch's pointers, in declaration order (after the counts). */
const ARRAY_FIELDS: readonly ArrayField[] = [
  { c: "token_ids", key: "tokenIds", needs: tokens },
  { c: "positions", key: "positions", needs: tokens },
  { c: "slot_mapping", key: "slotMapping", needs: tokens },
  // An empty step reads no sequence arrays at all.
  { c: "query_start", key: "queryStart", needs: (b) => (b.numTokens > 0 ? b.numSeqs + 1 : 0) },
  { c: "context_lens", key: "contextLens", needs: (b) => (b.numTokens > 0 ? b.numSeqs : 0) },
  { c: "block_tables", key: "blockTables", needs: (b) => (b.numTokens > 0 ? b.numSeqs * b.maxBlocksPerSeq : 0) },
  { c: "sample_index", key: "sampleIndex", needs: rows },
  { c: "temperature", key: "temperature", needs: rows },
  { c: "top_k", key: "topK", needs: rows },
  { c: "top_p", key: "topP", needs: rows },
  { c: "seed", key: "seed", needs: rows },
  { c: "out_tokens", key: "outTokens", needs: rows },
  { c: "out_logprobs", key: "outLogprobs", needs: rows },
  { c: "out_logits", key: "outLogits", needs: (b, vocab) => b.numRows * vocab, optional: true },
  { c: "min_p", key: "minP", needs: rows, optional: true },
  { c: "presence_penalty", key: "presencePenalty", needs: rows, optional: true },
  { c: "frequency_penalty", key: "frequencyPenalty", needs: rows, optional: true },
  { c: "repetition_penalty", key: "repetitionPenalty", needs: rows, optional: true },
  { c: "penalty_start", key: "penaltyStart", needs: rowStarts, optional: true },
  { c: "penalty_token_ids", key: "penaltyTokenIds", needs: entries("penaltyStart"), optional: true },
  { c: "penalty_counts", key: "penaltyCounts", needs: entries("penaltyStart"), optional: true },
  { c: "bias_start", key: "biasStart", needs: rowStarts, optional: true },
  { c: "bias_token_ids", key: "biasTokenIds", needs: entries("biasStart"), optional: true },
  { c: "bias_values", key: "biasValues", needs: entries("biasStart"), optional: true },
  { c: "allowed_start", key: "allowedStart", needs: rowStarts, optional: true },
  { c: "allowed_token_ids", key: "allowedTokenIds", needs: entries("allowedStart"), optional: true },
  { c: "banned_start", key: "bannedStart", needs: rowStarts, optional: true },
  { c: "banned_token_ids", key: "bannedTokenIds", needs: entries("bannedStart"), optional: true },
  { c: "score_token_ids", key: "scoreTokenIds", needs: rows, optional: true },
  { c: "top_logprobs", key: "topLogprobs", needs: rows, optional: true },
  { c: "out_top_token_ids", key: "outTopTokenIds", needs: topEntries, optional: true },
  { c: "out_top_logprobs", key: "outTopLogprobs", needs: topEntries, optional: true },
  { c: "out_ranks", key: "outRanks", needs: rows, optional: true },
];

const COUNT_BYTES = 4;
const POINTER_BYTES = 8;
// The pointers start at the next 8-byte boundary after the counts.
const POINTERS_AT = Math.ceil((COUNT_FIELDS.length * COUNT_BYTES) / POINTER_BYTES) * POINTER_BYTES;

/** Bytes of lp_step_batch on the 64-bit targets LMPool builds for. */
export const STEP_BATCH_BYTES = POINTERS_AT + ARRAY_FIELDS.length * POINTER_BYTES;

/** The layout this module packs, in lp_step_batch_layout()'s words: "size=S name@offset ...". */
export function stepBatchLayout(): string {
  const counts = COUNT_FIELDS.map((f, i) => `${f.c}@${i * COUNT_BYTES}`);
  const arrays = ARRAY_FIELDS.map((f, i) => `${f.c}@${POINTERS_AT + i * POINTER_BYTES}`);
  return [`size=${STEP_BATCH_BYTES}`, ...counts, ...arrays].join(" ");
}

/**
 * Packs batches into one reusable lp_step_batch buffer. The buffer is rewritten by every pack, so
 * one packer serves one step at a time (as a model does); the C side reads the struct during the
 * call only.
 */
export class StepBatchPacker {
  readonly #bytes = new Uint8Array(STEP_BATCH_BYTES);
  readonly #view = new DataView(this.#bytes.buffer);

  /** `vocab`: the model's vocabulary size, which out_logits must hold numRows times. */
  constructor(readonly vocab: number) {}

  /**
   * The struct for `b`. Each array must hold at least what the counts make the step read, so a
   * wrong count is a RangeError naming the field, never a native read past an array's end.
   */
  pack(b: StepBatch): Uint8Array {
    const v = this.#view;
    COUNT_FIELDS.forEach((f, i) => {
      const n = b[f.key] ?? 0;
      if (!Number.isInteger(n) || n < 0 || n > 0x7fffffff) {
        throw new RangeError(`StepBatch.${f.key} must be an int32 >= 0, got ${n}`);
      }
      v.setInt32(i * COUNT_BYTES, n, true);
    });
    ARRAY_FIELDS.forEach((f, i) => {
      const array = b[f.key] as (ArrayBufferView & { length: number }) | null | undefined;
      const needs = array == null && f.optional ? 0 : f.needs(b, this.vocab);
      if ((array?.length ?? 0) < needs) {
        throw new RangeError(`StepBatch.${f.key} has ${array?.length ?? 0} elements; the counts need ${needs}`);
      }
      v.setBigUint64(POINTERS_AT + i * POINTER_BYTES, array ? addressOf(array) : 0n, true);
    });
    return this.#bytes;
  }
}
