// The metric contract llm-d's scorers read: in vllm:num_requests_waiting, vllm:num_requests_running,
// vllm:kv_cache_usage_perc and vllm:cache_config_info the first series is the node's (no engine
// label: sums, the block-weighted usage, the node's block count), then one per rank.
import { expect, test } from "bun:test";
import type { EngineStats, RankStats } from "../../../lib/core/engine_api.ts";
import { ServerMetrics } from "../../../lib/server/metrics.ts";

function rank(r: number, o: Partial<RankStats>): RankStats {
  return {
    rank: r,
    numRunning: 0,
    numWaiting: 0,
    numBlocks: 100,
    blockSize: 16,
    numFreeBlocks: 100,
    numReclaimableBlocks: 0,
    kvUsage: 0,
    prefixQueryTokens: 0,
    prefixHitTokens: 0,
    numFinished: 0,
    numGeneratedTokens: 0,
    ...o,
  };
}

const stats: EngineStats = {
  ranks: [
    rank(0, { numRunning: 3, numWaiting: 1, kvUsage: 0.5, numBlocks: 100 }),
    rank(1, { numRunning: 2, numWaiting: 4, kvUsage: 0.2, numBlocks: 300 }),
  ],
  routing: {},
  transfers: { count: 0, blocks: 0, bytes: 0 },
  health: { ranks: [{ rank: 0, up: true, restarts: 0 }, { rank: 1, up: true, restarts: 0 }] },
};

/** The sample lines of family `name`, in order. */
function samples(text: string, name: string): string[] {
  return text.split("\n").filter((l) => l.startsWith(`${name}{`));
}

test("the node's series comes first, without an engine label, in the four families llm-d reads", () => {
  const text = new ServerMetrics("m").render(stats, 0);
  const waiting = samples(text, "vllm:num_requests_waiting");
  expect(waiting[0]).toBe('vllm:num_requests_waiting{model_name="m"} 5');
  expect(waiting.slice(1).every((l) => l.includes('engine="'))).toBe(true);
  expect(samples(text, "vllm:num_requests_running")[0]).toBe('vllm:num_requests_running{model_name="m"} 5');
  // (0.5 * 100 + 0.2 * 300) / 400
  expect(samples(text, "vllm:kv_cache_usage_perc")[0]).toBe('vllm:kv_cache_usage_perc{model_name="m"} 0.275');
  expect(samples(text, "vllm:cache_config_info")[0]).toBe(
    'vllm:cache_config_info{model_name="m",block_size="16",num_gpu_blocks="400"} 1',
  );
  expect(samples(text, "vllm:cache_config_info").length).toBe(3);
});
