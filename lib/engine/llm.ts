/**
 * LLM: the single-GPU engine in-process. It runs the same scheduler, block manager and model
 * runner as every data-plane worker (LocalEngine), driven by an async loop that yields to the event
 * loop between steps so a server in the same process stays responsive.
 * @module
 */
import { type KvCache, native as sharedNative, type NativeModel } from "../../ffi/native.ts";
import type {
  EngineStats,
  GenerateArgs,
  GenerationEngine,
  ServedModelInfo,
  TextTokenizer,
} from "../core/engine_api.ts";
import { AbortedError, DisposedError } from "../core/errors.ts";
import type { PromptInput, RequestOptions, RequestOutput, StreamDelta } from "../core/outputs.ts";
import { promptTokenIds } from "../core/prompt_input.ts";
import { resolveSamplingParams, type SamplingParams } from "../core/sampling_params.ts";
import { checkStructuredOutput } from "../model/grammar/grammar_checker.ts";
import { Sequence } from "../core/sequence.ts";
import { DeltaQueue } from "../local/delta_queue.ts";
import {
  buildLocalEngine,
  type BuiltEngine,
  type EngineBuildOptions,
  type EngineConfig,
} from "../local/engine_builder.ts";
import type { LocalEngine } from "../local/local_engine.ts";
import { yieldToEventLoop } from "../runtime/event_loop.ts";

/** Options of LLM.create: model directory, KV sizing, batching limits, backend and device. */
export type LLMOptions = EngineBuildOptions;

/** Resolved engine configuration, as reported by LLM.config. */
export type LLMConfig = EngineConfig;

interface Sink {
  push(delta: StreamDelta): void;
  fail(error: unknown): void;
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

  private constructor(parts: BuiltEngine) {
    this.#nativeModel = parts.nativeModel;
    this.#kv = parts.kv;
    this.engine = parts.engine;
    this.tokenizer = parts.tokenizer;
    this.model = parts.model;
    this.config = parts.config;
  }

  /** Loads the model, sizes and allocates the KV cache, and returns a ready engine. */
  static async create(o: LLMOptions): Promise<LLM> {
    return new LLM(await buildLocalEngine(o, sharedNative));
  }

  /** True until shutdown or a fatal engine error. */
  get healthy(): boolean {
    return !this.#disposed && this.#failure === undefined;
  }

  /** Streams one request's deltas; the last has `finished` and the full `output`. */
  async *stream(
    input: PromptInput,
    params: Partial<SamplingParams> = {},
    options: RequestOptions = {},
  ): AsyncGenerator<StreamDelta> {
    // Only a constrained request waits here: submission stays synchronous for the rest.
    if (params.structuredOutput !== undefined) await this.#prepareGrammar(params);
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
  async generate(...[inputs, params = {}, options = {}]: GenerateArgs): Promise<RequestOutput[]> {
    // Only a constrained request waits here: submission stays synchronous for the rest.
    if (params.structuredOutput !== undefined) await this.#prepareGrammar(params);
    const list = Array.isArray(inputs) ? inputs : [inputs];
    const ids: string[] = [];
    const results: Promise<RequestOutput>[] = [];
    try {
      list.forEach((input, i) => {
        const requestId = options.requestId !== undefined && list.length > 1
          ? `${options.requestId}-${i}`
          : options.requestId;
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
    return {
      ranks: [{ ...stats, ...this.engine.iterationTokens.counters(), ...this.engine.maskTimes.counters() }],
      routing: {},
      transfers: { count: 0, blocks: 0, bytes: 0 },
      health: { ranks: [{ rank: stats.rank, up: !this.#disposed, restarts: 0 }] },
    };
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

  /**
   * A structured output is checked apart (checkStructuredOutput: a bad one is a GrammarError here, and never
   * reaches the engine's grammar instance), and the engine's grammar engine is loaded.
   */
  async #prepareGrammar(params: Partial<SamplingParams>): Promise<void> {
    await checkStructuredOutput(params.structuredOutput);
    await this.engine.grammars.load();
  }

  #submit(
    input: PromptInput,
    params: Partial<SamplingParams>,
    options: RequestOptions,
    sink: Sink,
    stream: boolean,
  ): string {
    if (this.#disposed) throw new DisposedError("LLM");
    if (this.#failure !== undefined) throw new Error("LLM engine failed earlier", { cause: this.#failure });
    if (options.signal?.aborted) {
      throw new AbortedError(`request ${options.requestId ?? "(new)"} was aborted before it started`, {
        cause: options.signal.reason,
      });
    }
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
          throw new Error(
            `the scheduler cannot admit request ${this.engine.scheduler.waiting[0]?.requestId} although nothing runs`,
          );
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
