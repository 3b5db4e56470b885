/**
 * The server's Prometheus metrics: request latency histograms and token counters that the server
 * records from stream timings, plus per-rank gauges and lmpool_* counters read from EngineStats at
 * scrape time. Names and buckets follow vLLM's so existing routers and dashboards work unchanged.
 * @module
 */
import type { EngineStats, RankHealth, RankStats } from "../core/engine_api.ts";
import { LabeledHistogram, renderCounter, renderGauge, type Sample } from "./prometheus.ts";
import { ITERATION_TOKEN_BUCKETS, iterationTokensOf } from "../core/iteration_tokens.ts";
import { MASK_TIME_BUCKETS, type MaskTimeKind, maskTimesOf } from "../core/mask_time.ts";
import { type StreamTiming, VllmRequestMetrics } from "./vllm_request_metrics.ts";
import { nodeSeries } from "./node_metrics.ts";

export { type StreamTiming, TTFT_BUCKETS } from "./vllm_request_metrics.ts";

/** Sleep states of vLLM's engine_sleep_state gauge; LMPool's engines never sleep. */
const SLEEP_STATES: Record<string, number> = { awake: 1, weights_offloaded: 0, discard_all: 0 };

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
  readonly requests: VllmRequestMetrics;

  /** `maxModelLen` bounds vLLM's token-count buckets (1, 2, 5, 10, ... up to it). */
  constructor(readonly modelName: string, maxModelLen = 8192) {
    this.requests = new VllmRequestMetrics(modelName, maxModelLen);
  }

  get ttft(): LabeledHistogram {
    return this.requests.ttft;
  }
  get itl(): LabeledHistogram {
    return this.requests.itl;
  }
  get e2e(): LabeledHistogram {
    return this.requests.e2e;
  }
  get promptTokens() {
    return this.requests.promptTokens;
  }
  get generationTokens() {
    return this.requests.generationTokens;
  }

  /** Records one finished (or aborted) engine request. */
  recordRequest(t: StreamTiming): void {
    this.requests.recordRequest(t);
  }

  /** Records the n choices of one prompt once they all finished. */
  recordGroup(rank: number, n: number, maxGenerationTokens: number): void {
    this.requests.recordGroup(rank, n, maxGenerationTokens);
  }

  /** vLLM's per-step families from the ranks' step counters (zero where a rank reports none). */
  #stepFamilies(stats: EngineStats, ranks: number[]): string {
    const byRank = new Map<number, RankStats>(stats.ranks.map((r) => [r.rank, r]));
    const iteration = new LabeledHistogram(
      "vllm:iteration_tokens_total",
      "Histogram of number of tokens per engine_step.",
      ITERATION_TOKEN_BUCKETS,
    );
    // Per step with structured outputs (lib/core/mask_time.ts): the masks' host time and the part
    // the forward pass did not hide.
    const masks: [MaskTimeKind, LabeledHistogram][] = [
      ["mask_seconds", "Host time computing a step's structured-output masks (steps with constrained requests)."],
      ["mask_exposed_seconds", "Part of a step's structured-output mask time the forward pass did not hide."],
    ].map(([kind, help]) => [
      kind as MaskTimeKind,
      new LabeledHistogram(`lmpool_structured_output_${kind}`, help!, MASK_TIME_BUCKETS),
    ]);
    const preemptions: Sample[] = [];
    for (const rank of ranks) {
      const labels = this.requests.labels(rank);
      const r = byRank.get(rank);
      iteration.ensure(labels);
      const steps = r && iterationTokensOf(r);
      if (steps) iteration.add(labels, steps.bucketCounts, steps.sum);
      for (const [kind, h] of masks) {
        h.ensure(labels);
        const times = r && maskTimesOf(r, kind);
        if (times) h.add(labels, times.bucketCounts, times.sum);
      }
      preemptions.push({ labels, value: r?.numPreemptions ?? 0 });
    }
    return renderCounter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", preemptions) +
      iteration.render() + masks.map(([, h]) => h.render()).join("");
  }

  /** The whole exposition: engine gauges and counters from `stats`, then the recorded series. */
  render(stats: EngineStats, inFlightRequests: number): string {
    const model = this.modelName;
    const health = rankHealth(stats);
    // Every configured rank has every vLLM family from the first scrape on, zero before traffic.
    const ranks = [...new Set([...health.map((h) => h.rank), ...stats.ranks.map((r) => r.rank)])].sort((a, b) => a - b);
    for (const rank of ranks) this.requests.ensureEngine(rank);
    const byRank = (f: (h: RankHealth) => number): Sample[] =>
      health.map((h) => ({ labels: { model_name: model, engine: String(h.rank) }, value: f(h) }));
    const reported = new Map(stats.ranks.map((r) => [r.rank, r]));
    // A rank that has not reported yet (start-up) or is down has nothing running or cached: 0.
    const per = (f: (r: EngineStats["ranks"][number]) => number): Sample[] =>
      ranks.map((rank) => {
        const r = reported.get(rank);
        return { labels: { model_name: model, engine: String(rank) }, value: r ? f(r) : 0 };
      });
    const perReported = (f: (r: EngineStats["ranks"][number]) => number): Sample[] =>
      stats.ranks.map((r) => ({ labels: { model_name: model, engine: String(r.rank) }, value: f(r) }));
    // The node's series first in the families llm-d reads (node_metrics.ts); a sum() over one of
    // these families counts the node twice.
    const node = nodeSeries(model, stats);
    const parts = [
      renderGauge(
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        [node.running, ...per((r) => r.numRunning)],
      ),
      renderGauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", [
        node.waiting,
        ...per((r) => r.numWaiting),
      ]),
      renderGauge(
        "vllm:engine_sleep_state",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        ranks.flatMap((rank) =>
          Object.entries(SLEEP_STATES).map(([state, value]) => ({
            labels: { ...this.requests.labels(rank), sleep_state: state },
            value,
          }))
        ),
      ),
      renderGauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", [
        node.kvUsage,
        ...per((r) => r.kvUsage),
      ]),
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
        [
          ...(node.cacheConfig ? [node.cacheConfig] : []),
          ...stats.ranks.map((r) => ({
            labels: {
              model_name: model,
              engine: String(r.rank),
              block_size: String(r.blockSize),
              num_gpu_blocks: String(r.numBlocks),
            },
            value: 1,
          })),
        ],
      ),
      ...[
        [
          "vllm:external_prefix_cache_queries",
          "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
        ],
        [
          "vllm:external_prefix_cache_hits",
          "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
        ],
        ["vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items."],
        ["vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items."],
      ].map(([name, help]) =>
        // No KV connector and no multimodal models: these stay 0, as in vLLM without them.
        renderCounter(name!, help!, ranks.map((rank) => ({ labels: this.requests.labels(rank), value: 0 })))
      ),
      this.#stepFamilies(stats, ranks),
      this.requests.render(),
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
        perReported((r) => r.leakedBlocks ?? 0),
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
        perReported((r) => r.numFinished),
      ),
      renderCounter(
        "lmpool_engine_generated_tokens",
        "Tokens generated per rank, as the engine counts them.",
        perReported((r) => r.numGeneratedTokens),
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
