// `bun bench e2e --workload mooncake` end to end on the CPU backend with the tiny model and the real
// engines: a small window of the Mooncake trace replays on one and two ranks, every request
// completes with its capped output, the skips are reported, and results.json carries vLLM's keys.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const VLLM_KEYS = [
  "output_throughput",
  "request_throughput",
  "total_token_throughput",
  "mean_ttft_ms",
  "median_ttft_ms",
  "p99_ttft_ms",
  "mean_tpot_ms",
  "median_tpot_ms",
  "p99_tpot_ms",
  "mean_itl_ms",
  "median_itl_ms",
  "p99_itl_ms",
  "completed",
  "total_input_tokens",
  "total_output_tokens",
  "duration",
];

test("a Mooncake window replays through the real engines and reports skips and vLLM keys", () => {
  const out = join(mkdtempSync(join(tmpdir(), "lmpool-bench-mooncake-")), "results");
  const main = fileURLToPath(new URL("../../bench/main.ts", import.meta.url));
  const args = ["e2e", "--quick", "--workload", "mooncake", "--first", "20", "--max-input", "2048"];
  args.push("--max-output", "8", "--configs", "single-gpu,round-robin,lmpool", "--repetitions", "1", "--out", out);
  const r = spawnSync(process.execPath, ["run", main, ...args], { encoding: "utf8", timeout: 120_000 });
  if (r.status !== 0) {
    throw new Error(
      `bun bench ${args.join(" ")} exited ${r.status}:\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`,
    );
  }
  expect(r.stdout).toContain("20 requests of conversation_trace.jsonl (126 in the window, 106 skipped over maxInput");

  const results = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
  const scenario = results.scenarios[0];
  expect(scenario.workload.name).toBe("mooncake");
  expect(scenario.workload.requests).toBe(20);
  // The tiny model's context is 4,096 tokens: it took no request of at most 2,048 + 8.
  expect(scenario.workload.params).toMatchObject({
    first: 20,
    maxInput: 2048,
    maxOutput: 8,
    maxModelLen: 4096,
    scanned: 126,
    skippedOverMaxInput: 106,
    skippedOverContext: 0,
  });
  expect(Math.abs(scenario.traceProfile.tokenShare - scenario.workload.params.hashIdTokenShare)).toBeLessThan(0.001);

  const configs = scenario.configurations as {
    name: string;
    status: string;
    vllmBenchServe: Record<string, number>;
    repetitions: { metrics: { completed: number; outputTokens: number; tokenReuse: number } }[];
  }[];
  expect(configs.map((c) => `${c.name}: ${c.status}`)).toEqual(["single-gpu: ok", "round-robin: ok", "lmpool: ok"]);
  for (const c of configs) {
    const m = c.repetitions[0]!.metrics;
    expect(m.completed).toBe(20);
    // ignore_eos: every request runs to its capped trace output.
    expect(m.outputTokens).toBe(160);
    expect(m.tokenReuse).toBeGreaterThan(0);
    expect(Object.keys(c.vllmBenchServe)).toEqual(expect.arrayContaining(VLLM_KEYS));
    expect(c.vllmBenchServe.completed).toBe(20);
    expect(c.vllmBenchServe.total_output_tokens).toBe(160);
    expect(c.vllmBenchServe.output_throughput).toBeGreaterThan(0);
  }
}, 150_000);
