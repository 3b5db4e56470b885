// Prometheus text exposition: escaping, counters' _total convention, cumulative histogram buckets.
import { IterationTokenHistogram } from "../../../lib/core/iteration_tokens.ts";
import { describe, expect, test } from "bun:test";
import {
  escapeLabelValue,
  formatLabels,
  LabeledCounter,
  LabeledHistogram,
  renderCounter,
  renderGauge,
} from "../../../lib/server/prometheus.ts";
import { ServerMetrics, TTFT_BUCKETS } from "../../../lib/server/metrics.ts";
import { FakeEngine } from "./fake_engine.ts";

describe("prometheus text", () => {
  test("label values escape backslash, quote and newline", () => {
    expect(escapeLabelValue('a\\b"c\nd')).toBe('a\\\\b\\"c\\nd');
    expect(formatLabels({ a: "1", b: 'x"y' })).toBe('{a="1",b="x\\"y"}');
    expect(formatLabels({})).toBe("");
  });

  test("gauges and counters have HELP/TYPE; counter samples end in _total", () => {
    expect(renderGauge("g", "a gauge", [{ labels: { e: "0" }, value: 0.25 }])).toBe(
      '# HELP g a gauge\n# TYPE g gauge\ng{e="0"} 0.25\n',
    );
    expect(renderCounter("c", "a counter", [{ labels: {}, value: 3 }])).toBe(
      "# HELP c a counter\n# TYPE c counter\nc_total 3\n",
    );
    expect(renderCounter("c_total", "h", [{ labels: {}, value: 1 }])).toContain("# TYPE c counter\nc_total 1\n");
  });

  test("labelled counters sum per label set and refuse to shrink", () => {
    const c = new LabeledCounter("x", "h");
    c.inc({ a: "1", b: "2" }, 2);
    c.inc({ b: "2", a: "1" }, 3);
    c.inc({ a: "9" });
    expect(c.get({ a: "1", b: "2" })).toBe(5);
    expect(c.render()).toContain('x_total{a="9"} 1\n');
    expect(() => c.inc({}, -1)).toThrow(RangeError);
  });

  test("histogram buckets are cumulative with +Inf, sum and count", () => {
    const h = new LabeledHistogram("h", "help", [0.1, 1]);
    for (const v of [0.05, 0.1, 0.5, 3]) h.observe({ e: "0" }, v);
    const text = h.render();
    expect(text).toContain('h_bucket{e="0",le="0.1"} 2\n');
    expect(text).toContain('h_bucket{e="0",le="1"} 3\n');
    expect(text).toContain('h_bucket{e="0",le="+Inf"} 4\n');
    expect(text).toContain('h_sum{e="0"} 3.65\n');
    expect(text).toContain('h_count{e="0"} 4\n');
    expect(() => new LabeledHistogram("bad", "h", [1, 1])).toThrow(RangeError);
  });
});

describe("server metrics", () => {
  test("engine stats render per rank with vLLM names and the lmpool series", () => {
    const m = new ServerMetrics("m");
    const stats = new FakeEngine().stats();
    stats.ranks.push({
      ...stats.ranks[0]!,
      rank: 1,
      numRunning: 7,
      kvUsage: 0.5,
      numFreeBlocks: 40,
      numReclaimableBlocks: 10,
    });
    const text = m.render(stats, 3);
    expect(text).toContain('vllm:num_requests_running{model_name="m",engine="1"} 7\n');
    expect(text).toContain('vllm:kv_cache_usage_perc{model_name="m",engine="1"} 0.5\n');
    expect(text).toContain('vllm:prefix_cache_queries_total{model_name="m",engine="0"} 10\n');
    expect(text).toContain('vllm:prefix_cache_hits_total{model_name="m",engine="0"} 4\n');
    expect(text).toContain('lmpool_kv_blocks{model_name="m",engine="1",state="live"} 50\n');
    expect(text).toContain('lmpool_route_decisions_total{model_name="m",decision="load_balance"} 2\n');
    expect(text).toContain('lmpool_transfers_total{model_name="m"} 1\n');
    expect(text).toContain('lmpool_transfer_blocks_total{model_name="m"} 8\n');
    expect(text).toContain('lmpool_http_requests_in_flight{model_name="m"} 3\n');
    expect(text).toContain("# TYPE vllm:time_to_first_token_seconds histogram\n");
  });

  test("a recorded request lands in TTFT/ITL/e2e and the token counters under its rank", () => {
    const m = new ServerMetrics("m");
    m.recordRequest({
      arrivalMs: 1000,
      firstTokenMs: 1030,
      interTokenMs: [10, 20],
      finishMs: 1100,
      rank: 2,
      promptTokens: 7,
      generationTokens: 3,
      finishReason: "stop",
      maxTokens: 3,
    });
    const labels = { model_name: "m", engine: "2" };
    expect(m.ttft.count(labels)).toBe(1);
    expect(m.itl.count(labels)).toBe(2);
    expect(m.e2e.count(labels)).toBe(1);
    const text = m.e2e.render() + m.ttft.render();
    expect(text).toContain('vllm:e2e_request_latency_seconds_sum{model_name="m",engine="2"} 0.1\n');
    // 0.03 s falls in the 0.04 bucket, not the 0.02 one.
    expect(text).toContain('vllm:time_to_first_token_seconds_bucket{model_name="m",engine="2",le="0.02"} 0\n');
    expect(text).toContain('vllm:time_to_first_token_seconds_bucket{model_name="m",engine="2",le="0.04"} 1\n');
    expect(m.promptTokens.get(labels)).toBe(7);
    expect(m.generationTokens.get(labels)).toBe(3);
    expect(TTFT_BUCKETS.at(-1)).toBe(2560);
  });
});

/** Every vLLM family the reference's PrometheusStatLogger registers without optional features. */
const VLLM_FAMILIES = [
  "vllm:num_requests_running",
  "vllm:num_requests_waiting",
  "vllm:engine_sleep_state",
  "vllm:kv_cache_usage_perc",
  "vllm:prefix_cache_queries_total",
  "vllm:prefix_cache_hits_total",
  "vllm:external_prefix_cache_queries_total",
  "vllm:external_prefix_cache_hits_total",
  "vllm:mm_cache_queries_total",
  "vllm:mm_cache_hits_total",
  "vllm:num_preemptions_total",
  "vllm:prompt_tokens_total",
  "vllm:generation_tokens_total",
  "vllm:request_success_total",
  "vllm:request_prompt_tokens_count",
  "vllm:request_generation_tokens_count",
  "vllm:iteration_tokens_total_count",
  "vllm:request_max_num_generation_tokens_count",
  "vllm:request_params_n_count",
  "vllm:request_params_max_tokens_count",
  "vllm:time_to_first_token_seconds_count",
  "vllm:inter_token_latency_seconds_count",
  "vllm:request_time_per_output_token_seconds_count",
  "vllm:e2e_request_latency_seconds_count",
  "vllm:request_queue_time_seconds_count",
  "vllm:request_inference_time_seconds_count",
  "vllm:request_prefill_time_seconds_count",
  "vllm:request_decode_time_seconds_count",
  "vllm:cache_config_info",
];

describe("vLLM's metric set", () => {
  test("every family has a zero series per engine before any traffic", () => {
    const m = new ServerMetrics("m", 100);
    const stats = new FakeEngine().stats();
    stats.ranks.push({ ...stats.ranks[0]!, rank: 1 });
    stats.health.ranks.push({ rank: 1, up: true, restarts: 0 });
    const text = m.render(stats, 0);
    for (const family of VLLM_FAMILIES) {
      for (const engine of ["0", "1"]) {
        const line = text.split("\n").find((l) => l.startsWith(`${family}{`) && l.includes(`engine="${engine}"`));
        expect({ family, engine, present: line !== undefined }).toEqual({ family, engine, present: true });
      }
    }
    for (const reason of ["stop", "length", "abort", "error"]) {
      expect(text).toContain(`vllm:request_success_total{model_name="m",engine="1",finished_reason="${reason}"} 0\n`);
    }
    expect(text).toContain('vllm:engine_sleep_state{model_name="m",engine="0",sleep_state="awake"} 1\n');
    // vLLM's 1-2-5 token buckets up to max_model_len.
    expect(text).toContain('vllm:request_prompt_tokens_bucket{model_name="m",engine="0",le="100"} 0\n');
    expect(text).not.toContain('vllm:request_prompt_tokens_bucket{model_name="m",engine="0",le="200"}');
  });

  test("a request fills the phase, token and parameter histograms; step counters come from the rank's stats", () => {
    const m = new ServerMetrics("m", 100);
    m.recordRequest({
      arrivalMs: 0,
      firstTokenMs: 500,
      lastTokenMs: 900,
      interTokenMs: [200, 200],
      finishMs: 1000,
      rank: 0,
      promptTokens: 7,
      generationTokens: 3,
      finishReason: "length",
      maxTokens: 3,
      queuedMs: 100,
    });
    m.recordGroup(0, 1, 3);
    const stats = new FakeEngine().stats();
    // As a worker reports them: flat numeric counters from its histogram.
    const steps = new IterationTokenHistogram();
    for (const tokens of [1, 300, 299]) steps.observe(tokens);
    Object.assign(stats.ranks[0]!, { numPreemptions: 2, ...steps.counters() });
    const text = m.render(stats, 0);
    const l = 'model_name="m",engine="0"';
    expect(text).toContain(`vllm:request_queue_time_seconds_sum{${l}} 0.1\n`);
    expect(text).toContain(`vllm:request_prefill_time_seconds_sum{${l}} 0.4\n`);
    expect(text).toContain(`vllm:request_decode_time_seconds_sum{${l}} 0.4\n`);
    expect(text).toContain(`vllm:request_inference_time_seconds_sum{${l}} 0.8\n`);
    expect(text).toContain(`vllm:request_time_per_output_token_seconds_sum{${l}} 0.2\n`);
    expect(text).toContain(`vllm:request_params_max_tokens_sum{${l}} 3\n`);
    expect(text).toContain(`vllm:request_params_n_count{${l}} 1\n`);
    expect(text).toContain(`vllm:request_max_num_generation_tokens_sum{${l}} 3\n`);
    expect(text).toContain(`vllm:num_preemptions_total{${l}} 2\n`);
    expect(text).toContain(`vllm:iteration_tokens_total_bucket{${l},le="1"} 1\n`);
    expect(text).toContain(`vllm:iteration_tokens_total_bucket{${l},le="256"} 1\n`);
    expect(text).toContain(`vllm:iteration_tokens_total_bucket{${l},le="512"} 3\n`);
    expect(text).toContain(`vllm:iteration_tokens_total_count{${l}} 3\n`);
    expect(text).toContain(`vllm:iteration_tokens_total_sum{${l}} 600\n`);
    expect(text).toContain(`vllm:request_success_total{${l},finished_reason="length"} 1\n`);
  });
});
