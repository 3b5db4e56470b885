/**
 * Builds lp_step batches for tests from per-sequence descriptions (tokens of this step, how many
 * are cached before it, block table), the way a model runner would.
 * @module
 */
import { allocateStepBatch, type StepBatch } from "../../ffi/native.ts";

/** One sequence's part of a step. */
export interface SeqStep {
  /** Token ids this step feeds (query tokens). */
  tokens: readonly number[];
  /** Tokens already in the cache: the first query token sits at this position. */
  cached: number;
  /** Block ids of the sequence, in order. */
  blockTable: readonly number[];
}

/** One sampled row: a token index within the step and its sampling parameters. */
export interface SampleRow {
  token: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: bigint;
}

/** Step arrays for `seqs`; rows default to greedy at each sequence's last token. */
export function buildStep(
  seqs: readonly SeqStep[],
  blockSize: number,
  options: { rows?: readonly SampleRow[]; vocab?: number; maxBlocksPerSeq?: number } = {},
): StepBatch {
  const numTokens = seqs.reduce((n, s) => n + s.tokens.length, 0);
  const maxBlocksPerSeq = options.maxBlocksPerSeq ?? Math.max(1, ...seqs.map((s) => s.blockTable.length));
  const b: StepBatch = {
    ...allocateStepBatch({ tokens: numTokens, seqs: seqs.length, maxBlocksPerSeq, rows: 0 }),
    numSeqs: seqs.length,
    numTokens,
  };
  let t = 0;
  const lastTokens: number[] = [];
  seqs.forEach((s, i) => {
    b.queryStart[i] = t;
    b.contextLens[i] = s.cached + s.tokens.length;
    b.blockTables.set(s.blockTable, i * maxBlocksPerSeq);
    s.tokens.forEach((tok, j) => {
      const pos = s.cached + j;
      b.tokenIds[t] = tok;
      b.positions[t] = pos;
      b.slotMapping[t] = s.blockTable[Math.floor(pos / blockSize)]! * blockSize + (pos % blockSize);
      t++;
    });
    lastTokens.push(t - 1);
  });
  b.queryStart[seqs.length] = t;
  const rows: readonly SampleRow[] = options.rows ?? lastTokens.map((token) => ({ token }));
  b.numRows = rows.length;
  b.sampleIndex = Int32Array.from(rows, (r) => r.token);
  b.temperature = Float32Array.from(rows, (r) => r.temperature ?? 0);
  b.topK = Int32Array.from(rows, (r) => r.topK ?? 0);
  b.topP = Float32Array.from(rows, (r) => r.topP ?? 1);
  b.seed = BigUint64Array.from(rows, (r) => r.seed ?? 0n);
  b.outTokens = new Int32Array(rows.length);
  b.outLogprobs = new Float32Array(rows.length);
  if (options.vocab) b.outLogits = new Float32Array(rows.length * options.vocab);
  return b;
}

/** Row r of the step's out_logits. */
export function rowLogits(b: StepBatch, r: number, vocab: number): Float32Array {
  if (!b.outLogits) throw new Error("step was built without vocab: no out_logits");
  return b.outLogits.subarray(r * vocab, (r + 1) * vocab);
}

/** `count` distinct block ids from [0, numBlocks) in a seeded random order. */
export function shuffledBlocks(rand: () => number, numBlocks: number, count: number): number[] {
  const ids = Array.from({ length: numBlocks }, (_, i) => i);
  for (let i = ids.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  return ids.slice(0, count);
}
