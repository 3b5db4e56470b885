// `bun bench e2e --quick` end to end on the CPU backend with the tiny model and the real engines:
// it must write results.json, summary.md and the SVG charts, holding every configuration.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { QUICK_CONFIGURATIONS } from "../../bench/e2e.ts";
import { checkWellFormed } from "../unit/bench/xml_check.ts";

test("the quick e2e form writes JSON, markdown and SVG artifacts with the quick configurations", () => {
  const out = join(mkdtempSync(join(tmpdir(), "lmpool-bench-quick-")), "results");
  const main = fileURLToPath(new URL("../../bench/main.ts", import.meta.url));
  const r = spawnSync(process.execPath, ["run", main, "e2e", "--quick", "--out", out], { encoding: "utf8", timeout: 240_000 });
  if (r.status !== 0) throw new Error(`bun bench e2e --quick exited ${r.status} (${r.signal ?? "no signal"}):\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`);

  for (const f of ["results.json", "summary.md", "throughput.svg", "ttft.svg", "tpot.svg"]) expect(existsSync(join(out, f))).toBe(true);
  const results = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
  expect(results.schema).toBe("lmpool-bench/1");
  expect(results.metadata.model.architectures).toEqual(["Qwen3ForCausalLM"]);
  expect(results.metadata.seeds.workload).toBe(0);
  const scenario = results.scenarios[0];
  expect(scenario.workload.name).toBe("locality-1x");
  expect(scenario.traceProfile.requestShare).toBeCloseTo(0.75, 10);
  const configs = scenario.configurations as { name: string; status: string; completeRepetitions: number; intervals: Record<string, { mean: number; halfWidth: number | null }>; repetitions: { metrics: { completed: number; prefixHitRate: number } }[] }[];
  expect(configs.map((c) => c.name)).toEqual(QUICK_CONFIGURATIONS);

  // The single-GPU LLM runs for real: two complete repetitions, an interval on throughput, prefix hits.
  const single = configs.find((c) => c.name === "single-gpu")!;
  expect(single.status).toBe("ok");
  expect(single.completeRepetitions).toBe(2);
  expect(single.repetitions[0]!.metrics.completed).toBe(scenario.workload.requests);
  expect(single.intervals.outputThroughput!.mean).toBeGreaterThan(0);
  expect(single.intervals.outputThroughput!.halfWidth).not.toBeNull();
  expect(single.repetitions[0]!.metrics.prefixHitRate).toBeGreaterThan(0);
  // The multi-GPU configurations run LLMEngine on two CPU-backend ranks: every one completes.
  for (const c of configs.filter((c) => c.name !== "single-gpu")) {
    expect(`${c.name}: ${c.status}`).toBe(`${c.name}: ok`);
    expect(c.completeRepetitions).toBe(2);
    expect(c.repetitions[0]!.metrics.completed).toBe(scenario.workload.requests);
  }
  // Round-robin spreads the requests over both ranks.
  const rr = configs.find((c) => c.name === "round-robin")!;
  expect(Object.keys((rr.repetitions[0]!.metrics as unknown as { perRankRequests: Record<string, number> }).perRankRequests).sort()).toEqual(["0", "1"]);

  const md = readFileSync(join(out, "summary.md"), "utf8");
  for (const name of QUICK_CONFIGURATIONS) expect(md).toContain(`| ${name} |`);
  for (const f of ["throughput.svg", "ttft.svg", "tpot.svg"]) {
    const els = checkWellFormed(readFileSync(join(out, f), "utf8"));
    const bars = els.filter((e) => e.attrs.class === "bar");
    expect(bars.length).toBe(configs.length);
  }
}, 300_000);
