// Structured outputs with their masks computed while the forward pass runs (the model runner's
// deferred sampling: lp_step_launch with defer_sampling, then lp_step_launch_sampling), on the CPU
// backend: the same seeded tokens as the one-shot step (the model told not to split), constrained
// and free requests in the same batches; every JSON output valid; the steps' mask times counted and
// rendered as /metrics histograms.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import type { NativeModel, StepBatch } from "../../ffi/native.ts";
import type { GrammarSpec } from "../../lib/core/grammar_spec.ts";
import { maskTimesOf } from "../../lib/core/mask_time.ts";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { LLM } from "../../lib/engine/llm.ts";
import { ServerMetrics } from "../../lib/server/metrics.ts";
import { tinyModelDir } from "../helpers/tiny_model_dir.ts";

let llm: LLM;
setDefaultTimeout(60_000);

beforeAll(async () => {
  // No prefix cache: both runs prefill the same prompts the same way.
  llm = await LLM.create({
    model: await tinyModelDir(),
    backend: "cpu",
    numBlocks: 64,
    maxModelLen: 256,
    enablePrefixCaching: false,
  });
});
afterAll(async () => {
  await llm?.shutdown();
});

const SCHEMA = {
  type: "object",
  properties: { color: { enum: ["red", "green", "blue"] }, n: { type: "integer", minimum: 0, maximum: 9 } },
  required: ["color", "n"],
  additionalProperties: false,
};
const spec: GrammarSpec = { kind: "json_schema", text: JSON.stringify(SCHEMA), disableAnyWhitespace: true };

function valid(text: string): boolean {
  const v = JSON.parse(text) as Record<string, unknown>;
  return Object.keys(v).sort().join() === "color,n" && ["red", "green", "blue"].includes(v.color as string) &&
    Number.isInteger(v.n) && (v.n as number) >= 0 && (v.n as number) <= 9;
}

/** Constrained and free requests in the same batches, seeded and sampled. */
function run(): Promise<RequestOutput[][]> {
  const prompts = Array.from({ length: 4 }, (_, i) => `item ${i}:`);
  return Promise.all([
    llm.generate(prompts, { maxTokens: 40, temperature: 1, seed: 5, structuredOutput: spec }),
    llm.generate(prompts, { maxTokens: 10, temperature: 0.8, seed: 9, ignoreEos: true }),
  ]);
}

test("deferred masks sample what the one-shot step samples; outputs valid; mask times on /metrics", async () => {
  // The instance's own property shadows NativeModel's method (undefined: the model does not split).
  const model = llm.engine.kv.model as unknown as { stepLaunchSampling?: (b: StepBatch) => void };
  const split = (llm.engine.kv.model as NativeModel).stepLaunchSampling.bind(llm.engine.kv.model);
  let deferredSteps = 0;
  model.stepLaunchSampling = (b) => (deferredSteps++, split(b));
  const deferred = await run();
  expect(deferredSteps).toBeGreaterThan(3);
  const counted = maskTimesOf(llm.stats().ranks[0]!, "mask_seconds")!;
  const steps = counted.bucketCounts.reduce((a, n) => a + n, 0);
  expect(steps).toBe(deferredSteps);
  expect(counted.sum).toBeGreaterThan(0);

  // The model without the split: the runner computes the masks before a one-shot launch.
  model.stepLaunchSampling = undefined;
  let oneShot: RequestOutput[][];
  try {
    oneShot = await run();
  } finally {
    delete model.stepLaunchSampling;
  }
  expect(deferredSteps).toBe(steps); // none of those steps split
  expect(deferred.map((g) => g.map((o) => o.tokenIds))).toEqual(oneShot.map((g) => g.map((o) => o.tokenIds)));
  for (const out of deferred[0]!) {
    expect(out.finishReason).toBe("stop");
    expect({ text: out.text, valid: valid(out.text) }).toEqual({ text: out.text, valid: true });
  }

  const text = new ServerMetrics("tiny").render(llm.stats(), 0);
  const count = (family: string) =>
    Number(text.match(new RegExp(`^${family}_count\\{[^}]*engine="0"[^}]*\\} (\\d+)$`, "m"))?.[1]);
  // Both runs' constrained steps: the one-shot ones count too, with nothing hidden.
  expect(count("lmpool_structured_output_mask_seconds")).toBeGreaterThan(steps);
  expect(count("lmpool_structured_output_mask_exposed_seconds")).toBe(count("lmpool_structured_output_mask_seconds"));
  expect(text).toContain("# TYPE lmpool_structured_output_mask_seconds histogram");
});
