// LMPool on several GPUs (or several CPU-backend replicas): one control plane, one worker per rank,
// KV-aware routing. Requests sharing a long prefix land where that prefix is cached.
//   bun run examples/multi_gpu.ts [--model DIR] [--gpus N] [--policy lmpool|round-robin|...]
import { parseArgs } from "node:util";
import { ensureModel, LLMEngine } from "../mod.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    gpus: { type: "string", default: "2" },
    policy: { type: "string", default: "lmpool" },
  },
});

const model = values.model ?? (await ensureModel("demo"));
await using engine = await LLMEngine.create({
  model,
  gpus: Number(values.gpus),
  routing: { policy: values.policy as "lmpool" },
});
const system = "You are a helpful assistant. ".repeat(40);
const prompts = Array.from({ length: 8 }, (_, i) => `${system}Question ${i}: what is ${i} + ${i}?`);
const outputs = await engine.generate(prompts, { maxTokens: 8, temperature: 0 });
for (const o of outputs) {
  console.log(`${o.requestId}: rank ${o.metrics.rank}, ${o.metrics.numCachedTokens} cached prompt tokens`);
}
console.log(
  JSON.stringify(
    engine.stats().ranks.map((r) => ({ rank: r.rank, finished: r.numFinished, hitTokens: r.prefixHitTokens })),
  ),
);
