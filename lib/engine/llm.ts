/**
 * LLM: the single-GPU engine in-process. It runs the same scheduler, block manager and model
 * runner as every data-plane worker (LocalEngine), driven by an async loop that yields to the event
 * loop between steps so a server in the same process stays responsive.
 * @module
 */
import { Native, type KvCache, type NativeModel } from "../../ffi/native.ts";
import type { BackendKind } from "../../ffi/loader.ts";
import type { EngineStats, GenerationEngine, ServedModelInfo, TextTokenizer } from "../core/engine_api.ts";
import { AbortedError, DisposedError } from "../core/errors.ts";
import type { PromptInput, RequestOptions, RequestOutput, StreamDelta } from "../core/outputs.ts";
import { promptTokenIds } from "../core/prompt_input.ts";
import { resolveSamplingParams, type SamplingParams } from "../core/sampling_params.ts";
import { Sequence } from "../core/sequence.ts";
import { DeltaQueue } from "../local/delta_queue.ts";
import { sizeKvCache } from "../local/kv_sizing.ts";
import { LocalEngine } from "../local/local_engine.ts";
import { DEFAULT_LONG_PREFILL_CHUNK } from "../local/scheduler.ts";
import { DEFAULT_STEP_TARGET_MS } from "../local/step_budget.ts";
import { readModelSpec } from "../model/config.ts";
import { loadModel } from "../model/loader.ts";
import { ModelTokenizer } from "../model/tokenizer.ts";
import { yieldToEventLoop } from "../runtime/event_loop.ts";

/** Fraction of device memory an engine uses when its options name none (vLLM's default). */
export const DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;

/** Options of LLM.create. */
export interface LLMOptions {
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

/** Resolved engine configuration, as reported by LLM.config. */
export interface LLMConfig {
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

interface Sink {
  push(delta: StreamDelta): void;
  fail(error: unknown): void;
}

// One library handle per backend for the process: closing a library whose OpenMP threads or FFI
// trampolines are still around crashes the runtime, and reopening gains nothing.
const openedNatives = new Map<string, Native>();

/**
 * The process's native library for `backend` as LLM.create opens it (undefined: the loader's
 * choice), opened on first use; a caller that asks with the same `backend` gets the same handle.
 */
export function openNative(backend: BackendKind | undefined): Native {
  const key = backend ?? "auto";
  let n = openedNatives.get(key);
  if (!n) {
    n = new Native({ backend });
    openedNatives.set(key, n);
  }
  return n;
}

/**
 * A model on one device, generating in-process.
 *
 * @example
 * ```ts
 * import { LLM } from "./mod.ts";
 * import { ensureModel } from "./lib/model/demo_model.ts";
 *
 * // A tiny synthetic Qwen3 (random weights, real tokenizer); pass any Hugging Face directory instead.
 * await using llm = await LLM.create({ model: await ensureModel("tiny") });
 * const [out] = await llm.generate("The capital of France is", { maxTokens: 16, temperature: 0 });
 * console.log(out!.tokenIds, out!.text, out!.metrics);
 * for await (const d of llm.stream("Count to five:", { maxTokens: 8 })) console.log(d.text);
 * ```
 */
export class LLM implements GenerationEngine {
  readonly model: ServedModelInfo;
  readonly tokenizer: TextTokenizer;
  readonly config: Readonly<LLMConfig>;
  /** The engine core (scheduler, block manager, runner); exposed for tests and benchmarks. */
  readonly engine: LocalEngine;
  readonly #nativeModel: NativeModel;
  readonly #kv: KvCache;
  readonly #sinks = new Map<string, Sink>();
  #nextId = 0;
  #loop: Promise<void> | null = null;
  #disposed = false;
  #failure: unknown = undefined;

  private constructor(parts: { nativeModel: NativeModel; kv: KvCache; engine: LocalEngine; tokenizer: TextTokenizer; model: ServedModelInfo; config: LLMConfig }) {
    this.#nativeModel = parts.nativeModel;
    this.#kv = parts.kv;
    this.engine = parts.engine;
    this.tokenizer = parts.tokenizer;
    this.model = parts.model;
    this.config = parts.config;
  }

  /** Loads the model, sizes and allocates the KV cache, and returns a ready engine. */
  static async create(o: LLMOptions): Promise<LLM> {
    if (typeof o?.model !== "string" || o.model.length === 0) throw new TypeError(`LLM: model must be a model directory, got ${JSON.stringify(o?.model)}`);
    const spec = readModelSpec(o.model);
    const native = openNative(o.backend);
    if (o.device !== undefined) native.setDevice(o.device);
    const enableChunkedPrefill = o.enableChunkedPrefill ?? true;
    const maxModelLen = o.maxModelLen ?? spec.maxModelLen;
    if (!Number.isInteger(maxModelLen) || maxModelLen <= 0 || maxModelLen > spec.maxModelLen) {
      throw new RangeError(`maxModelLen must be an integer in 1..${spec.maxModelLen} (the model's max_position_embeddings), got ${maxModelLen}`);
    }
    const maxNumBatchedTokens = enableChunkedPrefill ? (o.maxNumBatchedTokens ?? 8192) : Math.max(o.maxNumBatchedTokens ?? 8192, maxModelLen);
    const maxNumSeqs = o.maxNumSeqs ?? 256;
    const blockSize = o.blockSize ?? (native.backend === "cuda" ? 256 : 16);
    for (const [k, v] of Object.entries({ blockSize, maxNumSeqs, maxNumBatchedTokens, numBlocks: o.numBlocks ?? 1 })) {
      if (!Number.isInteger(v) || v <= 0) throw new RangeError(`${k} must be a positive integer, got ${v}`);
    }
    const tokenizer = ModelTokenizer.fromDir(o.model, { eosTokenIds: spec.eosTokenIds });
    const { model: nativeModel } = await loadModel(o.model, native, { maxNumTokens: maxNumBatchedTokens, maxNumSeqs, onProgress: o.onProgress });
    let kv: KvCache | undefined;
    try {
      const numBlocks = o.numBlocks ??
        sizeKvCache(native, nativeModel, { blockSize, gpuMemoryUtilization: o.gpuMemoryUtilization ?? DEFAULT_GPU_MEMORY_UTILIZATION, maxNumBatchedTokens, maxNumSeqs, maxModelLen }).numBlocks;
      kv = nativeModel.createKvCache(numBlocks, blockSize);
      const config: LLMConfig = {
        blockSize, numBlocks, maxNumSeqs, maxNumBatchedTokens, maxModelLen,
        enablePrefixCaching: o.enablePrefixCaching ?? true, enableChunkedPrefill, longPrefillChunk: o.longPrefillChunk ?? DEFAULT_LONG_PREFILL_CHUNK,
        stepTargetMs: o.stepTargetMs ?? (enableChunkedPrefill ? DEFAULT_STEP_TARGET_MS : 0), backend: native.backend,
      };
      const engine = new LocalEngine({ model: nativeModel, kv, ...config, tokenizer: o.detokenize === false ? null : tokenizer, eosTokenIds: tokenizer.eosTokenIds, rank: o.rank, epoch: o.epoch });
      const model: ServedModelInfo = { name: spec.name, maxModelLen, vocabSize: spec.native.vocabSize, blockSize, backend: native.backend, numRanks: 1 };
      return new LLM({ nativeModel, kv, engine, tokenizer, model, config });
    } catch (e) {
      kv?.dispose();
      nativeModel.dispose();
      throw e;
    }
  }

  /** True until shutdown or a fatal engine error. */
  get healthy(): boolean {
    return !this.#disposed && this.#failure === undefined;
  }

  /** Streams one request's deltas; the last has `finished` and the full `output`. */
  async *stream(input: PromptInput, params: Partial<SamplingParams> = {}, options: RequestOptions = {}): AsyncGenerator<StreamDelta> {
    const queue = new DeltaQueue<StreamDelta>();
    const id = this.#submit(input, params, options, queue, true);
    let done = false;
    try {
      for await (const d of queue) {
        if (d.finished) done = true;
        yield d;
        if (done) return;
      }
    } finally {
      // The consumer stopped early: free the request's blocks now.
      if (!done) this.abort(id);
    }
  }

  /** Runs requests to completion; outputs in input order. An aborted request ends with finishReason "abort". */
  async generate(inputs: PromptInput | PromptInput[], params: Partial<SamplingParams> = {}, options: RequestOptions = {}): Promise<RequestOutput[]> {
    const list = Array.isArray(inputs) ? inputs : [inputs];
    const ids: string[] = [];
    const results: Promise<RequestOutput>[] = [];
    try {
      list.forEach((input, i) => {
        const requestId = options.requestId !== undefined && list.length > 1 ? `${options.requestId}-${i}` : options.requestId;
        const { promise, resolve, reject } = Promise.withResolvers<RequestOutput>();
        const sink: Sink = { push: (d) => d.output && resolve(d.output), fail: reject };
        ids.push(this.#submit(input, params, { ...options, requestId }, sink, false));
        results.push(promise);
      });
    } catch (e) {
      // All or nothing: drop the requests already queued.
      for (const id of ids) this.abort(id);
      await Promise.allSettled(results);
      throw e;
    }
    return Promise.all(results);
  }

  /** Aborts a request; its blocks are freed at once and its stream ends with finishReason "abort". */
  abort(requestId: string): void {
    const delta = this.engine.abort(requestId);
    if (delta) this.#deliver(delta);
  }

  /** One rank's stats. */
  stats(): EngineStats {
    const stats = this.engine.rankStats();
    return { ranks: [stats], routing: {}, transfers: { count: 0, blocks: 0, bytes: 0 }, health: { ranks: [{ rank: stats.rank, up: !this.#disposed, restarts: 0 }] } };
  }

  /** Aborts outstanding requests, waits for the step loop, frees the KV cache and the model. Idempotent. */
  async shutdown(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const id of [...this.#sinks.keys()]) this.abort(id);
    await this.#loop;
    this.#kv.dispose();
    this.#nativeModel.dispose();
  }

  /** Same as shutdown(). */
  dispose(): Promise<void> {
    return this.shutdown();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }

  #submit(input: PromptInput, params: Partial<SamplingParams>, options: RequestOptions, sink: Sink, stream: boolean): string {
    if (this.#disposed) throw new DisposedError("LLM");
    if (this.#failure !== undefined) throw new Error("LLM engine failed earlier", { cause: this.#failure });
    if (options.signal?.aborted) throw new AbortedError(`request ${options.requestId ?? "(new)"} was aborted before it started`, { cause: options.signal.reason });
    const requestId = options.requestId ?? `llm-${this.#nextId++}`;
    if (this.#sinks.has(requestId)) throw new RangeError(`request id ${JSON.stringify(requestId)} is already in use`);
    const seq = new Sequence({
      requestId,
      promptTokenIds: promptTokenIds(input, this.tokenizer, this.model.vocabSize),
      params: resolveSamplingParams(params),
      blockSize: this.config.blockSize,
      cacheSalt: options.cacheSalt,
    });
    this.engine.add(seq, { stream });
    const signal = options.signal;
    if (signal) {
      const onAbort = () => this.abort(requestId);
      signal.addEventListener("abort", onAbort, { once: true });
      this.#sinks.set(requestId, {
        push: (d) => {
          if (d.finished) signal.removeEventListener("abort", onAbort);
          sink.push(d);
        },
        fail: (e) => {
          signal.removeEventListener("abort", onAbort);
          sink.fail(e);
        },
      });
    } else {
      this.#sinks.set(requestId, sink);
    }
    this.#loop ??= this.#run();
    return requestId;
  }

  #deliver(d: StreamDelta): void {
    const sink = this.#sinks.get(d.requestId);
    if (!sink) return;
    if (d.finished) this.#sinks.delete(d.requestId);
    sink.push(d);
  }

  /** Steps while there is work, yielding to the event loop after every step. */
  async #run(): Promise<void> {
    try {
      // Let the caller finish submitting (a generate() batch) before the first step.
      await yieldToEventLoop();
      while (this.engine.hasWork) {
        const report = this.engine.step();
        for (const d of report.deltas) this.#deliver(d);
        if (report.kind === "idle" && this.engine.hasWork && this.engine.scheduler.numRunning === 0) {
          throw new Error(`the scheduler cannot admit request ${this.engine.scheduler.waiting[0]?.requestId} although nothing runs`);
        }
        await yieldToEventLoop();
      }
    } catch (e) {
      this.#failure = e;
      for (const [id, sink] of this.#sinks) {
        try {
          this.engine.abort(id);
        } catch {
          // The engine is already broken; the request fails with the original error below.
        }
        sink.fail(e);
      }
      this.#sinks.clear();
    } finally {
      this.#loop = null;
    }
  }
}
