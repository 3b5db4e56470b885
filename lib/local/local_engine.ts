/**
 * The per-GPU engine core: one scheduler, one block manager, one model runner and the per-request
 * stop checkers. `step()` schedules, runs one native step, applies the sampled tokens and returns
 * what each request gained. Synchronous and transport-agnostic: the in-process LLM drives it from
 * an async loop, a worker process from its message loop.
 * @module
 */
import type { KvCache } from "../../ffi/native.ts";
import type { BlockDelta, BlockSnapshot } from "../core/block_snapshot.ts";
import type { RankStats } from "../core/engine_api.ts";
import { IterationTokenHistogram } from "../core/iteration_tokens.ts";
import { MaskTimeHistogram } from "../core/mask_time.ts";
import type { FinishReason, PromptLogprob, RequestOutput, StreamDelta, TopLogprob } from "../core/outputs.ts";
import type { Sequence } from "../core/sequence.ts";
import { BlockManager } from "./block_manager.ts";
import { ModelRunner, type StepModel, type StepResult, topLogprobsOf } from "./model_runner.ts";
import { Scheduler, type SchedulerConfig, type SchedulerOutput, type StepKind, stepKind } from "./scheduler.ts";
import { chunkPairs } from "./step_budget.ts";
import { type StepWork, stepWorkOf } from "./step_work.ts";
import { StepTimings } from "./step_timings.ts";
import { type OutputDetokenizer, StopChecker } from "./stop_checker.ts";
import { DeviceGrammars, type GrammarVocabularySource } from "./sequence_grammar.ts";

/** Configuration of a LocalEngine. */
export interface LocalEngineOptions extends SchedulerConfig {
  model: StepModel;
  kv: KvCache;
  enablePrefixCaching: boolean;
  /** null: token ids only, no text (stop strings then cannot match). */
  tokenizer: OutputDetokenizer | null;
  eosTokenIds: readonly number[];
  /** Tokens the model samples from (ids at or past it are never banned for min_tokens); unset: no bound. */
  vocabSize?: number;
  /** The vocabulary structured outputs compile against (built on the first constrained request); absent: refused. */
  grammarVocabulary?: GrammarVocabularySource;
  rank?: number;
  epoch?: number;
}

/** Per-request options when adding. */
export interface AddOptions {
  /** Emit a delta after every step that changes the request (else only the final one). */
  stream?: boolean;
}

/** What one step did. */
export interface StepReport {
  /** Deltas of streaming requests, and the final delta of every request that finished. */
  deltas: StreamDelta[];
  kind: StepKind | "idle";
  numTokens: number;
  numSeqs: number;
  preempted: number;
  nativeMs: number;
  totalMs: number;
  /** What the step computed, in the terms of the engine cost model (absent for an idle step). */
  work?: StepWork;
}

interface Tracked {
  seq: Sequence;
  stop: StopChecker;
  stream: boolean;
  /** Its prompt logprobs went out with a delta (streams send them once, with the first token). */
  promptLogprobsSent?: boolean;
}

const now = () => performance.timeOrigin + performance.now();

/** Tokens and attention pairs a scheduled step computes (the step budget's cost features). */
function stepShape(out: SchedulerOutput): { tokens: number; pairs: number } {
  let pairs = 0;
  for (const s of out.scheduled) pairs += chunkPairs(s.start, s.numNewTokens);
  return { tokens: out.numTokens, pairs };
}

/** Scheduler + block manager + model runner of one device. */
export class LocalEngine {
  readonly rank: number;
  readonly blocks: BlockManager;
  readonly scheduler: Scheduler;
  readonly runner: ModelRunner;
  /** The physical KV cache (transfers gather from and scatter into it). */
  readonly kv: KvCache;
  /** Time per step kind (native and TypeScript). */
  readonly timings = new StepTimings();
  /** Tokens per step, as vLLM's iteration_tokens_total counts them. */
  readonly iterationTokens = new IterationTokenHistogram();
  /** Per step with constrained rows: its structured-output masks' time and the part the forward pass hid. */
  readonly maskTimes = new MaskTimeHistogram();
  /** Structured outputs: the grammar engine and the matchers of constrained sequences. */
  readonly grammars: DeviceGrammars;
  numFinished = 0;
  numGeneratedTokens = 0;
  readonly #requests = new Map<string, Tracked>();
  readonly #tokenizer: OutputDetokenizer | null;
  readonly #eos: readonly number[];
  /** A stepAsync is on the device; aborts then wait for it (#deferredAborts). */
  #stepping = false;
  readonly #deferredAborts = new Set<string>();

  constructor(o: LocalEngineOptions) {
    this.rank = o.rank ?? 0;
    this.kv = o.kv;
    this.blocks = new BlockManager({
      numBlocks: o.kv.numBlocks,
      blockSize: o.kv.blockSize,
      enablePrefixCaching: o.enablePrefixCaching,
      rank: this.rank,
      epoch: o.epoch,
    });
    this.scheduler = new Scheduler(o, this.blocks);
    this.grammars = new DeviceGrammars(o.grammarVocabulary ?? null);
    this.runner = new ModelRunner(
      o.model,
      o.kv,
      {
        maxNumTokens: o.maxNumBatchedTokens,
        maxNumSeqs: o.maxNumSeqs,
        maxBlocksPerSeq: Math.ceil(o.maxModelLen / o.kv.blockSize),
      },
      (seq) => this.grammars.of(seq),
      { eosTokenIds: o.eosTokenIds, ...(o.vocabSize !== undefined ? { vocabSize: o.vocabSize } : {}) },
    );
    this.#tokenizer = o.tokenizer;
    this.#eos = o.eosTokenIds;
  }

  /** True while any request is waiting or running. */
  get hasWork(): boolean {
    return this.scheduler.hasUnfinished;
  }

  get numRequests(): number {
    return this.#requests.size;
  }

  /**
   * Queues a request; throws CapacityError when it can never fit, RangeError on a duplicate id,
   * GrammarError when its structured output does not compile or {@link grammars} is not loaded yet
   * (`await engine.grammars.load()` first).
   */
  add(seq: Sequence, options: AddOptions = {}): void {
    if (this.#requests.has(seq.requestId)) {
      throw new RangeError(`request id ${JSON.stringify(seq.requestId)} is already running`);
    }
    if (!this.#tokenizer && seq.params.stop.length > 0) {
      throw new RangeError(`request ${seq.requestId} has stop strings, but this engine does not detokenize`);
    }
    if (seq.blockSize !== this.blocks.blockSize) {
      throw new RangeError(
        `request ${seq.requestId} uses blockSize ${seq.blockSize}, the cache ${this.blocks.blockSize}`,
      );
    }
    const spec = seq.params.structuredOutput;
    if (spec) this.grammars.add(seq, spec);
    try {
      this.scheduler.add(seq);
    } catch (e) {
      this.grammars.release(seq);
      throw e;
    }
    const stop = new StopChecker(seq, {
      tokenizer: this.#tokenizer,
      eosTokenIds: this.#eos,
      maxModelLen: this.scheduler.config.maxModelLen,
      incremental: options.stream ?? false,
    });
    this.#requests.set(seq.requestId, { seq, stop, stream: options.stream ?? false });
  }

  /**
   * Aborts a request: its blocks are freed now. Returns its final delta, or null if unknown. While
   * a {@link stepAsync} runs on the device (whose step may use the request's blocks), the abort
   * waits for the step's end and its final delta comes with that step's report.
   */
  abort(requestId: string): StreamDelta | null {
    const t = this.#requests.get(requestId);
    if (!t) return null;
    if (this.#stepping) {
      this.#deferredAborts.add(requestId);
      return null;
    }
    this.scheduler.finish(t.seq, "abort", now());
    return this.#final(t, [], [], "abort");
  }

  /** Runs one step. Returns an idle report when nothing can run. */
  step(): StepReport {
    const t0 = performance.now();
    const out = this.scheduler.schedule();
    if (out.scheduled.length === 0) return this.#idle(out, t0);
    return this.#complete(out, this.runner.execute(out), t0);
  }

  /** Whether messages are read while {@link stepAsync}'s step computes (the device runs it apart). */
  get readsMessagesDuringSteps(): boolean {
    return this.runner.launchesAsync;
  }

  /**
   * Runs one step like {@link step}, awaiting `turn` (one turn of the event loop) while the device
   * computes it, so the caller's messages are handled meanwhile. Requests may be added then;
   * aborts wait for the step's end (their final deltas come with this report).
   */
  async stepAsync(turn: () => Promise<void>): Promise<StepReport> {
    if (this.#stepping) throw new Error(`rank ${this.rank}: a step is already running`);
    const t0 = performance.now();
    const out = this.scheduler.schedule();
    if (out.scheduled.length === 0) return this.#idle(out, t0);
    this.#stepping = true;
    let result: StepResult;
    try {
      result = await this.runner.executeAsync(out, turn);
    } finally {
      this.#stepping = false;
    }
    const report = this.#complete(out, result, t0);
    for (const id of this.#deferredAborts) {
      const d = this.abort(id);
      if (d) report.deltas.push(d);
    }
    this.#deferredAborts.clear();
    return report;
  }

  #idle(out: SchedulerOutput, t0: number): StepReport {
    return {
      deltas: [],
      kind: "idle",
      numTokens: 0,
      numSeqs: 0,
      preempted: out.preempted.length,
      nativeMs: 0,
      totalMs: performance.now() - t0,
    };
  }

  /** Applies a computed step: the scheduler's bookkeeping, stop checks and the report's deltas. */
  #complete(out: SchedulerOutput, result: StepResult, t0: number): StepReport {
    const stamp = now();
    for (const s of out.scheduled) s.seq.firstScheduledTime ??= performance.timeOrigin + t0;
    // Each row's alternatives are built once, for the sequence and its delta alike.
    const tops: (TopLogprob[] | undefined)[] = [];
    const topOf = (r: number) => (r in tops ? tops[r] : (tops[r] = topLogprobsOf(result, r)));
    this.scheduler.completeStep(out, result.tokens, result.logprobs, stamp, topOf);
    this.runner.promptRows.record(result.logprobs, topOf);
    const deltas: StreamDelta[] = [];
    let row = 0;
    for (const s of out.scheduled) {
      if (!s.sample) continue;
      const token = result.tokens[row]!;
      const logprob = result.logprobs[row]!;
      const top = token >= 0 ? topOf(row) : undefined;
      const rowError = token < 0 ? result.rowErrors.get(row) : undefined;
      row++;
      const t = this.#requests.get(s.seq.requestId)!;
      if (rowError) {
        // The native step skipped this row (a bad sampling value): this sequence fails alone.
        this.scheduler.finish(t.seq, "error", stamp);
        deltas.push(
          this.#final(t, [], [], "error", "", {
            name: rowError.name,
            message: `request ${t.seq.requestId}: ${rowError.message}`,
          }),
        );
        continue;
      }
      this.numGeneratedTokens++;
      const verdict = t.stop.onToken(token);
      const grammar = verdict.finish ? "continue" : this.grammars.of(t.seq)?.advance(t.seq) ?? "continue";
      if (typeof grammar === "object") {
        this.scheduler.finish(t.seq, "error", stamp);
        deltas.push(this.#final(t, [token], [logprob], "error", verdict.text, {
          name: "GrammarError",
          message: `request ${t.seq.requestId}: token ${grammar.rejected} does not match its structured output`,
        }));
        continue;
      }
      // A complete grammar whose stop tokens lie outside the model's vocabulary ends as EOS would.
      const finish = verdict.finish ?? (grammar === "end" ? "stop" : undefined);
      if (finish) {
        this.scheduler.finish(t.seq, finish, stamp);
        deltas.push(this.#final(t, [token], [logprob], finish, verdict.text, undefined, top));
      } else if (t.stream) {
        deltas.push({
          requestId: t.seq.requestId,
          tokenIds: [token],
          text: verdict.text,
          finished: false,
          ...(t.seq.params.logprobs ? { logprobs: [logprob] } : {}),
          ...(top ? { topLogprobs: [top] } : {}),
          ...this.#promptLogprobsOnce(t),
        });
      }
    }
    const kind = stepKind(out);
    const totalMs = performance.now() - t0;
    this.timings.record(kind, out.numTokens, result.nativeMs, totalMs);
    this.iterationTokens.observe(out.numTokens);
    if (result.masks) this.maskTimes.observe(result.masks);
    // Only steps with prefill teach the step budget: it caps prefill tokens, and the many short
    // decode-only steps would outweigh (and soon forget) the few long chunks its fit is for.
    if (kind !== "decode") this.scheduler.stepBudget?.observe(stepShape(out), totalMs);
    return {
      deltas,
      kind,
      numTokens: out.numTokens,
      numSeqs: out.scheduled.length,
      preempted: out.preempted.length,
      nativeMs: result.nativeMs,
      totalMs,
      work: stepWorkOf(out),
    };
  }

  /** Load and cache facts for stats(). */
  rankStats(): RankStats {
    const b = this.blocks;
    return {
      rank: this.rank,
      numRunning: this.scheduler.numRunning,
      numWaiting: this.scheduler.numWaiting,
      numBlocks: b.numBlocks,
      blockSize: b.blockSize,
      numFreeBlocks: b.numFreeBlocks,
      numReclaimableBlocks: b.numReclaimableBlocks,
      kvUsage: b.numLiveBlocks / b.numBlocks,
      prefixQueryTokens: b.prefixQueryTokens,
      prefixHitTokens: b.prefixHitTokens,
      numFinished: this.numFinished,
      numGeneratedTokens: this.numGeneratedTokens,
      numPreemptions: this.scheduler.numPreemptions,
    };
  }

  /** Full block snapshot for the control plane. */
  snapshot(): BlockSnapshot {
    return this.blocks.snapshot(this.scheduler.load());
  }

  /** Block delta since the last report, or null. */
  takeDelta(): BlockDelta | null {
    return this.blocks.takeDelta(this.scheduler.load());
  }

  /** Block tables of live sequences (for invariant checks). */
  liveBlockTables(): number[][] {
    return [...this.scheduler.running, ...this.scheduler.waiting].map((s) => s.blockTable);
  }

  /** A streamed request's prompt logprobs, for the first delta carrying a token (then nothing). */
  #promptLogprobsOnce(t: Tracked): { promptLogprobs?: (PromptLogprob | null)[] } {
    if (t.promptLogprobsSent || t.seq.params.promptLogprobs === undefined) return {};
    t.promptLogprobsSent = true;
    return { promptLogprobs: [null, ...t.seq.promptLogprobs] };
  }

  #final(
    t: Tracked,
    tokenIds: number[],
    logprobs: number[],
    reason: FinishReason,
    text = "",
    error?: StreamDelta["error"],
    top?: TopLogprob[],
  ): StreamDelta {
    this.#requests.delete(t.seq.requestId);
    this.grammars.release(t.seq);
    this.numFinished++;
    const rest = t.stop.finish(reason);
    const output: RequestOutput = t.seq.toOutput(t.stop.text, this.rank);
    return {
      requestId: t.seq.requestId,
      tokenIds,
      text: t.stream ? text + rest : "",
      ...(t.seq.params.logprobs ? { logprobs } : {}),
      ...(top ? { topLogprobs: [top] } : {}),
      // A request that does not stream reads them from its output.
      ...(t.stream && tokenIds.length > 0 ? this.#promptLogprobsOnce(t) : {}),
      finished: true,
      finishReason: reason,
      output,
      ...(error ? { error } : {}),
    };
  }
}
