/**
 * Runs the engine requests behind one HTTP request: one per (prompt, choice) pair, each timed into
 * the metrics, and either merged into one stream of indexed deltas or collected to final choices.
 * @module
 */
import type { GenerationEngine } from "../core/engine_api.ts";
import type { FinishReason, PromptLogprob, RequestMetrics, StreamDelta, TopLogprob } from "../core/outputs.ts";
import type { SamplingParams } from "../core/sampling_params.ts";
import { ApiError } from "./errors.ts";
import type { ServerMetrics } from "./metrics.ts";
import type { TokenizedPrompt } from "./prompts.ts";
import { paramsForChoice } from "./sampling.ts";

/** What one HTTP request asks the engine for. */
export interface ChoiceJob {
  /** Prefix of the engine request ids (e.g. the response id). */
  id: string;
  prompts: TokenizedPrompt[];
  params: SamplingParams;
  n: number;
  sessionId?: string;
  cacheSalt?: string;
  signal: AbortSignal;
}

/** One running choice: its OpenAI index, the prompt it continues, and its timed engine stream. */
export interface ChoiceRun {
  index: number;
  prompt: TokenizedPrompt;
  deltas: AsyncIterable<StreamDelta>;
}

/** The collected result of one choice. */
export interface FinishedChoice {
  index: number;
  prompt: TokenizedPrompt;
  text: string;
  tokenIds: number[];
  logprobs: number[];
  /** Alternatives per token, when top logprobs were asked for. */
  topLogprobs: TopLogprob[][];
  /** When prompt logprobs were asked for (null for the first prompt token). */
  promptLogprobs?: (PromptLogprob | null)[];
  finishReason: FinishReason;
}

/** 500 for a sequence the engine failed on its own (the others of its batch went on). */
function generationFailed(d: StreamDelta): ApiError {
  const why = d.error ? `${d.error.name}: ${d.error.message}` : "no reason given";
  return new ApiError(
    500,
    `Generation failed in the engine for request ${d.requestId}: ${why}`,
    "InternalServerError",
  );
}

/** The n choices of one prompt, for vLLM's per-request n and most-generated-tokens histograms. */
interface ChoiceGroup {
  n: number;
  finished: number;
  maxGenerationTokens: number;
}

/** The engine's queue time of a finished request (arrival to first scheduled, ms), when its engine reports it. */
function queuedMsOf(m: RequestMetrics): number | undefined {
  return m.firstScheduledTime === undefined ? undefined : Math.max(0, m.firstScheduledTime - m.arrivalTime);
}

/** Wraps an engine stream, recording its latencies and token counts once it ends. */
async function* timed(
  source: AsyncIterable<StreamDelta>,
  metrics: ServerMetrics,
  request: { promptTokens: number; arrivalMs: number; maxTokens: number; group: ChoiceGroup },
): AsyncGenerator<StreamDelta> {
  let firstTokenMs: number | undefined;
  let lastTokenMs = 0;
  const interTokenMs: number[] = [];
  let generationTokens = 0;
  let rank: number | undefined;
  let queuedMs: number | undefined;
  let finishReason: FinishReason = "abort";
  try {
    for await (const d of source) {
      if (d.tokenIds.length > 0) {
        const now = performance.now();
        if (firstTokenMs === undefined) firstTokenMs = now;
        else interTokenMs.push(now - lastTokenMs);
        lastTokenMs = now;
        generationTokens += d.tokenIds.length;
      }
      if (d.finished) {
        finishReason = d.finishReason ?? "stop";
        if (d.output) {
          rank = d.output.metrics.rank;
          queuedMs = queuedMsOf(d.output.metrics);
        }
        if (finishReason === "error") throw generationFailed(d);
      }
      yield d;
    }
  } finally {
    // Without a final output the rank is unknown (the stream failed or was dropped): not recorded.
    // (No `return` here: it would swallow the stream's error.)
    if (rank !== undefined) {
      metrics.recordRequest({
        arrivalMs: request.arrivalMs,
        firstTokenMs,
        lastTokenMs: firstTokenMs === undefined ? undefined : lastTokenMs,
        interTokenMs,
        finishMs: performance.now(),
        rank,
        promptTokens: request.promptTokens,
        generationTokens,
        finishReason,
        maxTokens: request.maxTokens,
        queuedMs,
      });
      const g = request.group;
      g.maxGenerationTokens = Math.max(g.maxGenerationTokens, generationTokens);
      if (++g.finished === g.n) metrics.recordGroup(rank, g.n, g.maxGenerationTokens);
    }
  }
}

/** Starts n engine requests per prompt; choice index = promptIndex * n + j, with seed + j. */
export function startChoices(engine: GenerationEngine, metrics: ServerMetrics, job: ChoiceJob): ChoiceRun[] {
  const arrivalMs = performance.now();
  const runs: ChoiceRun[] = [];
  job.prompts.forEach((prompt, p) => {
    const group: ChoiceGroup = { n: job.n, finished: 0, maxGenerationTokens: 0 };
    for (let j = 0; j < job.n; j++) {
      const index = p * job.n + j;
      const source = engine.stream({ promptTokenIds: prompt.tokenIds }, paramsForChoice(job.params, j), {
        requestId: `${job.id}-${index}`,
        sessionId: job.sessionId,
        cacheSalt: job.cacheSalt,
        signal: job.signal,
      });
      const request = { promptTokens: prompt.tokenIds.length, arrivalMs, maxTokens: job.params.maxTokens, group };
      runs.push({ index, prompt, deltas: timed(source, metrics, request) });
    }
  });
  return runs;
}

/** Consumes one choice to its end. */
async function collectChoice(run: ChoiceRun): Promise<FinishedChoice> {
  const out: FinishedChoice = {
    index: run.index,
    prompt: run.prompt,
    text: "",
    tokenIds: [],
    logprobs: [],
    topLogprobs: [],
    finishReason: "abort",
  };
  for await (const d of run.deltas) {
    out.text += d.text;
    out.tokenIds.push(...d.tokenIds);
    if (d.logprobs) out.logprobs.push(...d.logprobs);
    if (d.topLogprobs) out.topLogprobs.push(...d.topLogprobs);
    const prompt = d.promptLogprobs ?? d.output?.promptLogprobs;
    if (prompt) out.promptLogprobs = prompt;
    if (d.finished) out.finishReason = d.finishReason ?? "stop";
  }
  return out;
}

/** One delta of a merged stream, tagged with its choice. */
export interface IndexedDelta {
  run: ChoiceRun;
  delta: StreamDelta;
}

/** Interleaves the choices' streams in arrival order; returning early closes every source. */
export async function* mergeChoices(runs: readonly ChoiceRun[]): AsyncGenerator<IndexedDelta> {
  const iterators = runs.map((r) => r.deltas[Symbol.asyncIterator]());
  // Settled results, never rejections: a source that fails after we stopped listening must not
  // become an unhandled rejection.
  type Step = { i: number; r?: IteratorResult<StreamDelta>; err?: unknown };
  const pending = new Map<number, Promise<Step>>();
  const pull = (i: number) =>
    pending.set(i, iterators[i]!.next().then((r): Step => ({ i, r }), (err: unknown): Step => ({ i, err })));
  iterators.forEach((_, i) => pull(i));
  try {
    while (pending.size > 0) {
      const { i, r, err } = await Promise.race(pending.values());
      pending.delete(i);
      if (!r) throw err;
      if (r.done) continue;
      pull(i);
      yield { run: runs[i]!, delta: r.value };
    }
  } finally {
    // Early exit (client gone or an error): close the sources that are still open.
    await Promise.allSettled([...pending.keys()].map((i) => iterators[i]!.return?.()));
  }
}

/** OpenAI `usage`: each prompt counts once however many choices continue it. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Builds `usage` from the prompts and the generated token count. */
export function usageOf(prompts: readonly TokenizedPrompt[], completionTokens: number): Usage {
  const promptTokens = prompts.reduce((s, p) => s + p.tokenIds.length, 0);
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}

/** Runs every choice to its end; the first failure aborts the rest (through `abort`). */
export async function collectChoices(
  runs: readonly ChoiceRun[],
  abort: (reason: unknown) => void,
): Promise<FinishedChoice[]> {
  try {
    return await Promise.all(runs.map(collectChoice));
  } catch (err) {
    abort(err);
    throw err;
  }
}

/** The OpenAI finish_reason of an engine finish; a failed generation becomes a thrown error. */
export function openAIFinishReason(reason: FinishReason): "stop" | "length" | "abort" {
  if (reason === "error") throw new Error("generation failed in the engine");
  return reason;
}
