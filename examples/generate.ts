// Offline generation on one device with the in-process LLM.
//   bun run examples/generate.ts [--model DIR] [--prompt TEXT] [--max-tokens N] [--temperature T]
// Without --model it uses the embedded random-weight demo model (its text is random).
import { parseArgs } from "node:util";
import { ensureModel, LLM } from "../mod.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    prompt: { type: "string", default: "The capital of France is" },
    "max-tokens": { type: "string", default: "32" },
    temperature: { type: "string", default: "0" },
  },
});

const model = values.model ?? (await ensureModel("demo"));
await using llm = await LLM.create({ model });
const [out] = await llm.generate(values.prompt!, {
  maxTokens: Number(values["max-tokens"]),
  temperature: Number(values.temperature),
});
console.log(JSON.stringify({ text: out!.text, tokens: out!.tokenIds.length, finishReason: out!.finishReason }));
