/**
 * One series per node for the metric families llm-d's scorers read from a model-server pod
 * (llm-d-router pkg/epp/framework/plugins/datalayer/extractor/metrics at ebab687: the vLLM engine
 * config reads vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc and
 * vllm:cache_config_info's block_size and num_gpu_blocks labels, and vllm:lora_requests_info where
 * adapters exist). Its extractor keeps one series per family, the first it meets (all carry the same
 * timestamp), so the node's series, without an `engine` label, comes first in each family, before
 * the per-rank ones: a scraper that reads one series of a pod sees the whole node. LMPool serves no
 * LoRA adapters, so there is no lora_requests_info, as in vLLM without adapters.
 * @module
 */
import type { EngineStats } from "../core/engine_api.ts";
import type { Sample } from "./prometheus.ts";

/** The node's series of the four families, from the ranks that reported. */
export interface NodeSeries {
  running: Sample;
  waiting: Sample;
  /** Used blocks over all blocks of the node (each rank weighted by its blocks). */
  kvUsage: Sample;
  /** block_size and the node's total num_gpu_blocks; absent before any rank reported. */
  cacheConfig: Sample | undefined;
}

/** The node-level samples of `stats` for model `model`. */
export function nodeSeries(model: string, stats: EngineStats): NodeSeries {
  const labels = { model_name: model };
  let running = 0, waiting = 0, blocks = 0, used = 0;
  for (const r of stats.ranks) {
    running += r.numRunning;
    waiting += r.numWaiting;
    blocks += r.numBlocks;
    used += r.kvUsage * r.numBlocks;
  }
  const first = stats.ranks[0];
  return {
    running: { labels, value: running },
    waiting: { labels, value: waiting },
    kvUsage: { labels, value: blocks > 0 ? used / blocks : 0 },
    cacheConfig: first
      ? { labels: { ...labels, block_size: String(first.blockSize), num_gpu_blocks: String(blocks) }, value: 1 }
      : undefined,
  };
}
