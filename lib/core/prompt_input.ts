/**
 * A {@link PromptInput} as token ids: text through the tokenizer, or the ids given, each checked
 * against the model's vocabulary. LLM and LLMEngine both take prompts through this.
 * @module
 */
import type { TextTokenizer } from "./engine_api.ts";
import type { PromptInput } from "./outputs.ts";

/** Token ids of `input`; TypeError for a malformed input, RangeError naming an id outside 0..vocabSize-1. */
export function promptTokenIds(
  input: PromptInput,
  tokenizer: Pick<TextTokenizer, "encode">,
  vocabSize: number,
): number[] {
  const text = typeof input === "string" ? input : "prompt" in input ? input.prompt : undefined;
  let ids: unknown[];
  let what: string;
  if (text !== undefined) {
    if (typeof text !== "string") throw new TypeError(`prompt must be a string, got ${typeof text}`);
    ids = tokenizer.encode(text);
    what = "the encoded prompt";
  } else {
    const given = (input as { promptTokenIds?: unknown }).promptTokenIds;
    if (!Array.isArray(given)) throw new TypeError("input must be a string, { prompt } or { promptTokenIds }");
    ids = given;
    what = "promptTokenIds";
  }
  ids.forEach((t, i) => {
    if (!Number.isInteger(t) || (t as number) < 0 || (t as number) >= vocabSize) {
      throw new RangeError(`${what}[${i}] = ${String(t)} is not a token id in 0..${vocabSize - 1}`);
    }
  });
  return ids as number[];
}
