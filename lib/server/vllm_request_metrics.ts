/**
 * vLLM's per-request metric families (PrometheusStatLogger in vllm/v1/metrics/loggers.py): latency
 * and phase-time histograms, token-count and request-parameter histograms, token counters and
 * request_success by finish reason, with its names, help texts and buckets. Every family has a
 * zero series per engine from the first scrape on (`ensureEngine`), as vLLM creates them at start.
 * @module
 */
import type { FinishReason } from "../core/outputs.ts";
import { LabeledCounter, LabeledHistogram, type Labels } from "./prometheus.ts";

/** vLLM's time-to-first-token buckets (seconds). */
export const TTFT_BUCKETS = [
  0.001,
  0.005,
  0.01,
  0.02,
  0.04,
  0.06,
  0.08,
  0.1,
  0.25,
  0.5,
  0.75,
  1,
  2.5,
  5,
  7.5,
  10,
  20,
  40,
  80,
  160,
  640,
  2560,
];
/** vLLM's inter-token and per-output-token latency buckets (seconds). */
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
/** vLLM's request latency buckets (seconds): e2e, queue, prefill, decode, inference. */
const REQUEST_LATENCY_BUCKETS = [
  0.3,
  0.5,
  0.8,
  1,
  1.5,
  2,
  2.5,
  5,
  10,
  15,
  20,
  30,
  40,
  50,
  60,
  120,
  240,
  480,
  960,
  1920,
  7680,
];
/** vLLM's request_params_n buckets. */
const N_BUCKETS = [1, 2, 5, 10, 20];
/** The finish reasons request_success is labelled with (vLLM's FinishReason, lower case). */
const FINISH_REASONS: readonly FinishReason[] = ["stop", "length", "abort", "error"];

/** vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to `max`. */
export function oneTwoFiveBuckets(max: number): number[] {
  const out: number[] = [];
  for (let scale = 1;; scale *= 10) {
    for (const m of [1, 2, 5]) {
      if (m * scale > max) return out;
      out.push(m * scale);
    }
  }
}

/** Timings of one engine request (one choice) as the server saw its stream (ms on one monotonic clock). */
export interface StreamTiming {
  arrivalMs: number;
  firstTokenMs?: number;
  /** When its last token came (absent without tokens). */
  lastTokenMs?: number;
  /** Gaps between consecutive token-carrying deltas after the first. */
  interTokenMs: number[];
  finishMs: number;
  rank: number;
  promptTokens: number;
  generationTokens: number;
  finishReason: FinishReason;
  /** The request's max_tokens. */
  maxTokens: number;
  /**
   * Time from arrival to the first step that scheduled it (ms), when the engine reports it: it
   * splits the time before the first token into queue and prefill.
   */
  queuedMs?: number;
}

/** The per-request families of one server. */
export class VllmRequestMetrics {
  readonly ttft = new LabeledHistogram(
    "vllm:time_to_first_token_seconds",
    "Histogram of time to first token in seconds.",
    TTFT_BUCKETS,
  );
  readonly itl = new LabeledHistogram(
    "vllm:inter_token_latency_seconds",
    "Histogram of inter-token latency in seconds.",
    ITL_BUCKETS,
  );
  readonly tpot = new LabeledHistogram(
    "vllm:request_time_per_output_token_seconds",
    "Histogram of time_per_output_token_seconds per request.",
    ITL_BUCKETS,
  );
  readonly e2e = new LabeledHistogram(
    "vllm:e2e_request_latency_seconds",
    "Histogram of e2e request latency in seconds.",
    REQUEST_LATENCY_BUCKETS,
  );
  readonly queue = new LabeledHistogram(
    "vllm:request_queue_time_seconds",
    "Histogram of time spent in WAITING phase for request.",
    REQUEST_LATENCY_BUCKETS,
  );
  readonly inference = new LabeledHistogram(
    "vllm:request_inference_time_seconds",
    "Histogram of time spent in RUNNING phase for request.",
    REQUEST_LATENCY_BUCKETS,
  );
  readonly prefill = new LabeledHistogram(
    "vllm:request_prefill_time_seconds",
    "Histogram of time spent in PREFILL phase for request.",
    REQUEST_LATENCY_BUCKETS,
  );
  readonly decode = new LabeledHistogram(
    "vllm:request_decode_time_seconds",
    "Histogram of time spent in DECODE phase for request.",
    REQUEST_LATENCY_BUCKETS,
  );
  readonly promptTokensHist: LabeledHistogram;
  readonly generationTokensHist: LabeledHistogram;
  readonly maxGenerationTokens: LabeledHistogram;
  readonly maxTokensParam: LabeledHistogram;
  readonly nParam = new LabeledHistogram("vllm:request_params_n", "Histogram of the n request parameter.", N_BUCKETS);
  readonly promptTokens = new LabeledCounter("vllm:prompt_tokens", "Number of prefill tokens processed.");
  readonly generationTokens = new LabeledCounter("vllm:generation_tokens", "Number of generation tokens processed.");
  readonly requestSuccess = new LabeledCounter("vllm:request_success", "Count of successfully processed requests.");

  constructor(readonly modelName: string, maxModelLen: number) {
    const tokenBuckets = oneTwoFiveBuckets(maxModelLen);
    this.promptTokensHist = new LabeledHistogram(
      "vllm:request_prompt_tokens",
      "Number of prefill tokens processed.",
      tokenBuckets,
    );
    this.generationTokensHist = new LabeledHistogram(
      "vllm:request_generation_tokens",
      "Number of generation tokens processed.",
      tokenBuckets,
    );
    this.maxGenerationTokens = new LabeledHistogram(
      "vllm:request_max_num_generation_tokens",
      "Histogram of maximum number of requested generation tokens.",
      tokenBuckets,
    );
    this.maxTokensParam = new LabeledHistogram(
      "vllm:request_params_max_tokens",
      "Histogram of the max_tokens request parameter.",
      tokenBuckets,
    );
  }

  #histograms(): LabeledHistogram[] {
    return [
      this.promptTokensHist,
      this.generationTokensHist,
      this.maxGenerationTokens,
      this.nParam,
      this.maxTokensParam,
      this.ttft,
      this.itl,
      this.tpot,
      this.e2e,
      this.queue,
      this.inference,
      this.prefill,
      this.decode,
    ];
  }

  /** The labels of one engine (rank). */
  labels(rank: number): Labels {
    return { model_name: this.modelName, engine: String(rank) };
  }

  /** Creates the zero series of every family for `rank` (a no-op once they exist). */
  ensureEngine(rank: number): void {
    const labels = this.labels(rank);
    for (const h of this.#histograms()) h.ensure(labels);
    this.promptTokens.ensure(labels);
    this.generationTokens.ensure(labels);
    for (const reason of FINISH_REASONS) this.requestSuccess.ensure({ ...labels, finished_reason: reason });
  }

  /**
   * Records one finished choice, as vLLM records a finished request: latencies, phase times (queue
   * and prefill only when the engine reported the queue time), token counts and its finish reason.
   */
  recordRequest(t: StreamTiming): void {
    const labels = this.labels(t.rank);
    this.ensureEngine(t.rank);
    const s = (ms: number) => Math.max(0, ms) / 1000;
    if (t.firstTokenMs !== undefined) this.ttft.observe(labels, s(t.firstTokenMs - t.arrivalMs));
    for (const gap of t.interTokenMs) this.itl.observe(labels, s(gap));
    this.e2e.observe(labels, s(t.finishMs - t.arrivalMs));
    const decodeMs = t.firstTokenMs !== undefined && t.lastTokenMs !== undefined ? t.lastTokenMs - t.firstTokenMs : 0;
    this.decode.observe(labels, s(decodeMs));
    this.tpot.observe(labels, t.generationTokens > 1 ? s(decodeMs) / (t.generationTokens - 1) : 0);
    if (t.queuedMs !== undefined) {
      const scheduledMs = t.arrivalMs + t.queuedMs;
      this.queue.observe(labels, s(t.queuedMs));
      if (t.firstTokenMs !== undefined) this.prefill.observe(labels, s(t.firstTokenMs - scheduledMs));
      this.inference.observe(labels, s((t.lastTokenMs ?? t.finishMs) - scheduledMs));
    }
    this.promptTokensHist.observe(labels, t.promptTokens);
    this.generationTokensHist.observe(labels, t.generationTokens);
    this.maxTokensParam.observe(labels, t.maxTokens);
    this.promptTokens.inc(labels, t.promptTokens);
    this.generationTokens.inc(labels, t.generationTokens);
    this.requestSuccess.inc({ ...labels, finished_reason: t.finishReason });
  }

  /** Records a finished group of `n` choices of one prompt: vLLM's n and most-generated-tokens histograms. */
  recordGroup(rank: number, n: number, maxGenerationTokens: number): void {
    const labels = this.labels(rank);
    this.ensureEngine(rank);
    this.nParam.observe(labels, n);
    this.maxGenerationTokens.observe(labels, maxGenerationTokens);
  }

  /** Every family in text format. */
  render(): string {
    return [
      this.promptTokens.render(),
      this.generationTokens.render(),
      this.requestSuccess.render(),
      ...this.#histograms().map((h) => h.render()),
    ].join("");
  }
}
