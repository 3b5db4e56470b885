/**
 * How many KV blocks a worker allocates. On a GPU: run a warm-up step of the largest shape (so
 * workspaces and library handles exist), then blocks = floor((total * utilization - used) /
 * blockBytes), where used is the device memory in use after weights and warm-up. On the CPU
 * backend memory is plentiful but slow to fill, so the cache is capped: enough for maxNumSeqs
 * sequences of maxModelLen tokens, at most CPU_KV_MAX_BYTES and a quarter of free memory.
 * @module
 */
import { allocateStepBatch, type Native, type NativeModel, type StepBatch } from "../../ffi/native.ts";
import { CapacityError } from "../core/errors.ts";

/** Upper bound of an automatically sized CPU KV cache. */
const CPU_KV_MAX_BYTES = 2 * 1024 ** 3;

/** What sizing needs to know. */
export interface KvSizingOptions {
  blockSize: number;
  /** Fraction of device memory this worker may use, (0, 1]. */
  gpuMemoryUtilization: number;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  maxModelLen: number;
}

/** The outcome, with the measurements behind it. */
export interface KvSizing {
  numBlocks: number;
  blockBytes: number;
  totalBytes: number;
  /** Device bytes in use after weights and warm-up (before the KV cache). */
  usedBytes: number;
}

/** Measures memory and returns the number of KV blocks to allocate. */
export function sizeKvCache(native: Native, model: NativeModel, o: KvSizingOptions): KvSizing {
  if (!(o.gpuMemoryUtilization > 0 && o.gpuMemoryUtilization <= 1)) {
    throw new RangeError(`gpuMemoryUtilization must be in (0, 1], got ${o.gpuMemoryUtilization}`);
  }
  const tokens = Math.min(o.maxNumBatchedTokens, o.maxModelLen);
  const seqs = Math.min(o.maxNumSeqs, tokens);
  const warmBlocks = native.backend === "cuda" ? Math.ceil(tokens / o.blockSize) + seqs : 1;
  const kv = model.createKvCache(warmBlocks, o.blockSize);
  const blockBytes = kv.blockBytes;
  try {
    if (native.backend === "cuda") model.step(kv, warmUpBatch(tokens, seqs, o.blockSize));
  } finally {
    kv.dispose();
  }
  native.synchronize();
  const { free, total } = native.deviceMemory();
  const usedBytes = total - free;
  if (native.backend === "cpu") {
    const wanted = Math.ceil(o.maxModelLen / o.blockSize) * o.maxNumSeqs;
    const cap = Math.floor(Math.min(CPU_KV_MAX_BYTES, free / 4) / blockBytes);
    return { numBlocks: Math.max(1, Math.min(wanted, cap)), blockBytes, totalBytes: total, usedBytes };
  }
  const budget = total * o.gpuMemoryUtilization - usedBytes;
  const numBlocks = Math.floor(budget / blockBytes);
  if (numBlocks < 1) {
    throw new CapacityError(
      `no room for a KV cache: gpuMemoryUtilization ${o.gpuMemoryUtilization} of ${gib(total)} leaves ${
        gib(budget)
      } after ` +
        `${gib(usedBytes)} in use (weights + warm-up); one block needs ${(blockBytes / 2 ** 20).toFixed(1)} MiB`,
    );
  }
  return { numBlocks, blockBytes, totalBytes: total, usedBytes };
}

/** `seqs` prefill sequences sharing `tokens` tokens, each sampling its last token. */
function warmUpBatch(tokens: number, seqs: number, bs: number): StepBatch {
  const per = Math.floor(tokens / seqs);
  const lens = Array.from({ length: seqs }, (_, i) => per + (i === 0 ? tokens - per * seqs : 0));
  const maxBlocks = Math.ceil(Math.max(...lens) / bs);
  const b: StepBatch = {
    ...allocateStepBatch({ tokens, seqs, maxBlocksPerSeq: maxBlocks }),
    numSeqs: seqs,
    numTokens: tokens,
    numRows: seqs,
  };
  b.temperature.fill(1);
  b.topP.fill(1);
  let t = 0;
  let block = 0;
  lens.forEach((len, i) => {
    b.queryStart[i] = t;
    b.contextLens[i] = len;
    const first = block;
    for (let j = 0; j < Math.ceil(len / bs); j++) b.blockTables[i * maxBlocks + j] = block++;
    for (let p = 0; p < len; p++, t++) {
      b.positions[t] = p;
      b.slotMapping[t] = (first + Math.floor(p / bs)) * bs + (p % bs);
    }
    b.sampleIndex[i] = t - 1;
  });
  b.queryStart[seqs] = t;
  return b;
}

function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
}
