/**
 * Building one rank's engine: read the model directory, load the weights onto the device, size and
 * allocate the KV cache, and assemble the LocalEngine (scheduler, block manager, model runner).
 * The in-process LLM and every worker process build their engine here, so both run the same
 * defaults and checks.
 * @module
 */
import type { BackendKind } from "../../ffi/loader.ts";
import type { KvCache, Native, NativeModel } from "../../ffi/native.ts";
import type { ServedModelInfo } from "../core/engine_api.ts";
import { readModelSpec } from "../model/config.ts";
import { loadModel } from "../model/loader.ts";
import { ModelTokenizer } from "../model/tokenizer.ts";
import { grammarVocabulary } from "../model/grammar/vocabulary.ts";
import { readText } from "../runtime/files.ts";
import { join } from "node:path";
import { sizeKvCache } from "./kv_sizing.ts";
import { LocalEngine } from "./local_engine.ts";

/** Fraction of device memory an engine uses when its options name none (vLLM's default). */
export const DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;

/** What an engine is built from (LLM.create's options). */
export interface EngineBuildOptions {
  /** Hugging Face model directory (config.json, *.safetensors, tokenizer.json). */
  model: string;
  /** Tokens per KV block (default 16 on CPU, 256 on CUDA). */
  blockSize?: number;
  /** KV blocks to allocate; default: sized from gpuMemoryUtilization. */
  numBlocks?: number;
  /** Fraction of device memory to use for weights, workspaces and KV (default 0.9). */
  gpuMemoryUtilization?: number;
  /** Sequences per step (default 256). */
  maxNumSeqs?: number;
  /** Tokens per step (default 8192; raised to maxModelLen when chunked prefill is off). */
  maxNumBatchedTokens?: number;
  /** Longest prompt + output (default: the model's max_position_embeddings). */
  maxModelLen?: number;
  /** Share complete KV blocks across requests (default true). */
  enablePrefixCaching?: boolean;
  /** Split long prompts across steps (default true). */
  enableChunkedPrefill?: boolean;
  /**
   * While sequences decode or short prompts wait, prompts with more than this many tokens left to
   * prefill share this many tokens per step, so steps stay short: better time per output token,
   * worse time to first token of long prompts (default 0: no limit; lib/local/scheduler.ts).
   */
  longPrefillChunk?: number;
  /**
   * Predicted time, in ms, that one step's prefill tokens may fill: long prompts are chunked by a
   * budget learned from measured step times, so no step holds the thread much longer (default 500
   * with chunked prefill; 0 turns the cap off; needs chunked prefill; lib/local/step_budget.ts).
   */
  stepTargetMs?: number;
  /** Native backend (default: CUDA when a GPU is visible, else CPU; LMPOOL_BACKEND overrides). */
  backend?: BackendKind;
  /** Device index (default 0). */
  device?: number;
  /** Produce output text (default true). Off: outputs carry token ids only and stop strings are refused. */
  detokenize?: boolean;
  /** Rank and epoch reported in block snapshots (worker processes set them; default 0 and now). */
  rank?: number;
  epoch?: number;
  /** Load progress callback. */
  onProgress?: (loadedBytes: number, totalBytes: number, tensorName: string) => void;
}

/** An engine's resolved configuration (LLM.config). */
export interface EngineConfig {
  blockSize: number;
  numBlocks: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  maxModelLen: number;
  enablePrefixCaching: boolean;
  enableChunkedPrefill: boolean;
  longPrefillChunk: number;
  /** 0: no cost cap on steps. */
  stepTargetMs: number;
  backend: BackendKind;
}

/** A built engine and the native objects it owns; `dispose` frees the KV cache and the model. */
export interface BuiltEngine {
  readonly engine: LocalEngine;
  readonly tokenizer: ModelTokenizer;
  readonly model: ServedModelInfo;
  readonly config: EngineConfig;
  readonly nativeModel: NativeModel;
  readonly kv: KvCache;
  dispose(): void;
}

/**
 * Loads the model onto the device of the native library `open` gives for `o.backend` (`o.device`
 * selects the device), sizes and allocates the KV cache, and returns the engine. Bad options are
 * TypeErrors/RangeErrors naming the option and value; a bad model directory fails before the
 * library opens.
 */
export async function buildLocalEngine(
  o: EngineBuildOptions,
  open: (backend: BackendKind | undefined) => Native,
): Promise<BuiltEngine> {
  if (typeof o?.model !== "string" || o.model.length === 0) {
    throw new TypeError(`LLM: model must be a model directory, got ${JSON.stringify(o?.model)}`);
  }
  const spec = readModelSpec(o.model);
  const native = open(o.backend);
  if (o.device !== undefined) native.setDevice(o.device);
  const enableChunkedPrefill = o.enableChunkedPrefill ?? true;
  const maxModelLen = o.maxModelLen ?? spec.maxModelLen;
  if (!Number.isInteger(maxModelLen) || maxModelLen <= 0 || maxModelLen > spec.maxModelLen) {
    throw new RangeError(
      `maxModelLen must be an integer in 1..${spec.maxModelLen} (the model's max_position_embeddings), got ${maxModelLen}`,
    );
  }
  const maxNumBatchedTokens = enableChunkedPrefill
    ? (o.maxNumBatchedTokens ?? 8192)
    : Math.max(o.maxNumBatchedTokens ?? 8192, maxModelLen);
  const maxNumSeqs = o.maxNumSeqs ?? 256;
  const blockSize = o.blockSize ?? (native.backend === "cuda" ? 256 : 16);
  for (const [k, v] of Object.entries({ blockSize, maxNumSeqs, maxNumBatchedTokens, numBlocks: o.numBlocks ?? 1 })) {
    if (!Number.isInteger(v) || v <= 0) throw new RangeError(`${k} must be a positive integer, got ${v}`);
  }
  const tokenizer = ModelTokenizer.fromDir(o.model, { eosTokenIds: spec.eosTokenIds });
  // Streaming detokenization reads the byte table: built now, not on the first streamed token.
  if (o.detokenize !== false) tokenizer.tokenBytes;
  const { model: nativeModel } = await loadModel(o.model, native, {
    maxNumTokens: maxNumBatchedTokens,
    maxNumSeqs,
    onProgress: o.onProgress,
  });
  let kv: KvCache | undefined;
  try {
    const numBlocks = o.numBlocks ??
      sizeKvCache(native, nativeModel, {
        blockSize,
        gpuMemoryUtilization: o.gpuMemoryUtilization ?? DEFAULT_GPU_MEMORY_UTILIZATION,
        maxNumBatchedTokens,
        maxNumSeqs,
        maxModelLen,
      }).numBlocks;
    kv = nativeModel.createKvCache(numBlocks, blockSize);
    const enablePrefixCaching = o.enablePrefixCaching ?? true;
    const engine = new LocalEngine({
      model: nativeModel,
      kv,
      maxNumSeqs,
      maxNumBatchedTokens,
      maxModelLen,
      enablePrefixCaching,
      enableChunkedPrefill,
      longPrefillChunk: o.longPrefillChunk,
      stepTargetMs: o.stepTargetMs,
      tokenizer: o.detokenize === false ? null : tokenizer,
      eosTokenIds: tokenizer.eosTokenIds,
      vocabSize: spec.native.vocabSize,
      // Read again on the first constrained request, so an engine that never sees one holds no copy.
      grammarVocabulary: () =>
        grammarVocabulary(
          JSON.parse(readText(join(o.model, "tokenizer.json"))),
          spec.native.vocabSize,
          tokenizer.eosTokenIds,
        ),
      rank: o.rank,
      epoch: o.epoch,
    });
    // The scheduler resolves the step defaults; the config reports what it chose.
    const { longPrefillChunk, stepTargetMs } = engine.scheduler.config;
    const config: EngineConfig = {
      blockSize,
      numBlocks,
      maxNumSeqs,
      maxNumBatchedTokens,
      maxModelLen,
      enablePrefixCaching,
      enableChunkedPrefill,
      longPrefillChunk,
      stepTargetMs,
      backend: native.backend,
    };
    const model: ServedModelInfo = {
      name: spec.name,
      maxModelLen,
      vocabSize: spec.native.vocabSize,
      blockSize,
      backend: native.backend,
      numRanks: 1,
    };
    const cache = kv;
    return {
      engine,
      tokenizer,
      model,
      config,
      nativeModel,
      kv: cache,
      dispose: () => {
        cache.dispose();
        nativeModel.dispose();
      },
    };
  } catch (e) {
    kv?.dispose();
    nativeModel.dispose();
    throw e;
  }
}
