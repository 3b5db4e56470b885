/**
 * The server's Prometheus metrics: request latency histograms and token counters that the server
 * records from stream timings, plus per-rank gauges and lmpool_* counters read from EngineStats at
 * scrape time. Names and buckets follow vLLM's so existing routers and dashboards work unchanged.
 * @module
 */
import type { EngineStats, RankHealth } from "../core/engine_api.ts";
import type { FinishReason } from "../core/outputs.ts";
import { LabeledCounter, LabeledHistogram, renderCounter, renderGauge, type Sample } from "./prometheus.ts";

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
/** vLLM's inter-token latency buckets (seconds). */
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
/** vLLM's end-to-end request latency buckets (seconds). */
const E2E_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];

/** Timings of one engine request as the server saw its stream (ms on one monotonic clock). */
export interface StreamTiming {
  arrivalMs: number;
  firstTokenMs?: number;
  /** Gaps between consecutive token-carrying deltas after the first. */
  interTokenMs: number[];
  finishMs: number;
  rank: number;
  promptTokens: number;
  generationTokens: number;
  finishReason: FinishReason;
}

// Control-plane counters that are levels, not counts: they are gauges of their own, never
// samples of the route decision counter (a counter must only grow).
const ROUTING_GAUGES: Record<string, [name: string, help: string]> = {
  reservations: ["lmpool_route_reservations", "KV reservations the control plane holds for routed requests."],
  cached_blocks: ["lmpool_cached_blocks", "KV blocks in the control plane's page table, over all ranks."],
};
// Read as their own series: healthy ranks is lmpool_healthy_ranks, restarts their own counter.
const ROUTING_NOT_DECISIONS = new Set(["healthy_ranks", "control_plane_restarts", ...Object.keys(ROUTING_GAUGES)]);

/** Per-rank health as the engine reports it (`stats.health`), in rank order. */
function rankHealth(stats: EngineStats): RankHealth[] {
  return [...stats.health.ranks].sort((a, b) => a.rank - b.rank);
}

/** Server-recorded request metrics plus the scrape-time rendering of engine stats. */
export class ServerMetrics {
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
  readonly e2e = new LabeledHistogram(
    "vllm:e2e_request_latency_seconds",
    "Histogram of end to end request latency in seconds.",
    E2E_BUCKETS,
  );
  readonly promptTokens = new LabeledCounter("vllm:prompt_tokens", "Number of prefill tokens processed.");
  readonly generationTokens = new LabeledCounter("vllm:generation_tokens", "Number of generation tokens processed.");
  readonly requestSuccess = new LabeledCounter("vllm:request_success", "Count of successfully processed requests.");

  constructor(readonly modelName: string) {}

  /** Records one finished (or aborted) engine request. */
  recordRequest(t: StreamTiming): void {
    const labels = { model_name: this.modelName, engine: String(t.rank) };
    if (t.firstTokenMs !== undefined) this.ttft.observe(labels, (t.firstTokenMs - t.arrivalMs) / 1000);
    for (const gap of t.interTokenMs) this.itl.observe(labels, gap / 1000);
    this.e2e.observe(labels, (t.finishMs - t.arrivalMs) / 1000);
    this.promptTokens.inc(labels, t.promptTokens);
    this.generationTokens.inc(labels, t.generationTokens);
    if (t.finishReason === "stop" || t.finishReason === "length" || t.finishReason === "abort") {
      this.requestSuccess.inc({ ...labels, finished_reason: t.finishReason });
    }
  }

  /** The whole exposition: engine gauges and counters from `stats`, then the recorded series. */
  render(stats: EngineStats, inFlightRequests: number): string {
    const model = this.modelName;
    const health = rankHealth(stats);
    const byRank = (f: (h: RankHealth) => number): Sample[] =>
      health.map((h) => ({ labels: { model_name: model, engine: String(h.rank) }, value: f(h) }));
    const per = (f: (r: EngineStats["ranks"][number]) => number): Sample[] =>
      stats.ranks.map((r) => ({ labels: { model_name: model, engine: String(r.rank) }, value: f(r) }));
    const parts = [
      renderGauge(
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        per((r) => r.numRunning),
      ),
      renderGauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", per((r) => r.numWaiting)),
      renderGauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", per((r) => r.kvUsage)),
      renderCounter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        per((r) => r.prefixQueryTokens),
      ),
      renderCounter(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        per((r) => r.prefixHitTokens),
      ),
      renderGauge(
        "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig.",
        stats.ranks.map((r) => ({
          labels: {
            model_name: model,
            engine: String(r.rank),
            block_size: String(r.blockSize),
            num_gpu_blocks: String(r.numBlocks),
          },
          value: 1,
        })),
      ),
      this.ttft.render(),
      this.itl.render(),
      this.e2e.render(),
      this.promptTokens.render(),
      this.generationTokens.render(),
      this.requestSuccess.render(),
      renderGauge(
        "lmpool_kv_blocks",
        "KV blocks per rank by state: live (held by requests), reclaimable (cached prefix, unreferenced), free.",
        stats.ranks.flatMap((r) => {
          const base = { model_name: model, engine: String(r.rank) };
          const live = r.numBlocks - r.numFreeBlocks - r.numReclaimableBlocks;
          return [
            { labels: { ...base, state: "live" }, value: live },
            { labels: { ...base, state: "reclaimable" }, value: r.numReclaimableBlocks },
            { labels: { ...base, state: "free" }, value: r.numFreeBlocks },
          ];
        }),
      ),
      renderGauge(
        "lmpool_kv_leaked_blocks",
        "KV blocks still referenced while the rank is idle (0 unless blocks leak).",
        per((r) => r.leakedBlocks ?? 0),
      ),
      renderGauge("lmpool_healthy_ranks", "Worker ranks serving now.", [{
        labels: { model_name: model },
        value: health.filter((h) => h.up).length,
      }]),
      renderGauge(
        "lmpool_rank_up",
        "1 while the rank serves, 0 while it is down or restarting.",
        byRank((h) => (h.up ? 1 : 0)),
      ),
      renderCounter(
        "lmpool_worker_restarts",
        "Times the launcher restarted the rank's worker.",
        byRank((h) => h.restarts),
      ),
      renderCounter(
        "lmpool_engine_finished_requests",
        "Requests finished per rank, as the engine counts them.",
        per((r) => r.numFinished),
      ),
      renderCounter(
        "lmpool_engine_generated_tokens",
        "Tokens generated per rank, as the engine counts them.",
        per((r) => r.numGeneratedTokens),
      ),
      renderCounter(
        "lmpool_route_decisions",
        "Routing decisions of the control plane, by decision kind.",
        Object.entries(stats.routing)
          .filter(([decision]) => !ROUTING_NOT_DECISIONS.has(decision))
          .map(([decision, value]) => ({ labels: { model_name: model, decision }, value })),
      ),
      ...Object.entries(ROUTING_GAUGES)
        .filter(([key]) => stats.routing[key] !== undefined)
        .map(([key, [name, help]]) =>
          renderGauge(name, help, [{ labels: { model_name: model }, value: stats.routing[key]! }])
        ),
      renderCounter("lmpool_control_plane_restarts", "Times the launcher restarted the control plane.", [
        { labels: { model_name: model }, value: stats.routing.control_plane_restarts ?? 0 },
      ]),
      renderCounter("lmpool_transfers", "KV transfers between GPUs.", [{
        labels: { model_name: model },
        value: stats.transfers.count,
      }]),
      renderCounter("lmpool_transfer_blocks", "KV blocks moved or copied between GPUs.", [{
        labels: { model_name: model },
        value: stats.transfers.blocks,
      }]),
      renderCounter("lmpool_transfer_bytes", "KV bytes sent between GPUs.", [{
        labels: { model_name: model },
        value: stats.transfers.bytes,
      }]),
      renderGauge("lmpool_http_requests_in_flight", "Generation requests the HTTP server is serving now.", [{
        labels: { model_name: model },
        value: inFlightRequests,
      }]),
    ];
    return parts.join("");
  }
}
