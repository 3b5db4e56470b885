// The throughput benchmark's quick form (CPU backend, tiny model) runs and reports consistent numbers.
import { expect, spyOn, test } from "bun:test";
import entry, { type ThroughputResult } from "../../bench/throughput.ts";

test("bench throughput --quick runs and reports output tok/s and the step-time split", async () => {
  const lines: string[] = [];
  const log = spyOn(console, "log").mockImplementation((...args: unknown[]) => void lines.push(args.join(" ")));
  try {
    await entry.run(["--quick", "--json"]);
  } finally {
    log.mockRestore();
  }
  const text = lines.join("\n");
  expect(text).toMatch(/output [\d,]+ tok\/s/);
  const r = JSON.parse(lines.at(-1)!) as ThroughputResult & { workload: string };
  expect(r.workload).toBe("random-quick");
  expect(r.numRequests).toBe(16);
  expect(r.backend).toBe("cpu");
  // ignore_eos: every request generates exactly max_tokens (8..24 each).
  expect(r.outputTokens).toBeGreaterThanOrEqual(16 * 8);
  expect(r.outputTokens).toBeLessThanOrEqual(16 * 24);
  expect(r.outputTokPerS).toBeCloseTo(r.outputTokens / r.seconds, 3);
  const decode = r.byKind.decode!;
  expect(decode.steps).toBeGreaterThan(0);
  expect(decode.nativeMs).toBeLessThanOrEqual(decode.totalMs);
  const stepTokens = Object.values(r.byKind).reduce((s, k) => s + k.tokens, 0);
  // Every prompt token is computed once (distinct random prompts) plus one token per decode step entry.
  expect(stepTokens).toBeGreaterThanOrEqual(r.promptTokens);
}, 60_000);
