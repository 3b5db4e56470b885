/**
 * Request fields -> the engine's SamplingParams, plus the context-length check. Everything here
 * throws 400 ApiErrors naming the OpenAI field, so no invalid request reaches the engine.
 * @module
 */
import type { TextTokenizer } from "../core/engine_api.ts";
import { resolveSamplingParams, type SamplingParams } from "../core/sampling_params.ts";
import { badRequest } from "./errors.ts";
import type { GrammarSpec } from "../core/grammar_spec.ts";
import { grammarSpecOf, type StructuredOutputFields } from "./structured_outputs.ts";

/** The sampling fields both completion routes share (already type-checked by zod). */
export interface SamplingFields extends StructuredOutputFields {
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  stop_token_ids?: number[] | null;
  ignore_eos?: boolean | null;
  min_tokens?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  repetition_penalty?: number | null;
  min_p?: number | null;
  logit_bias?: Record<string, number> | null;
  allowed_token_ids?: number[] | null;
  bad_words?: string[] | null;
  skip_special_tokens?: boolean | null;
}

/** What the token-id fields are checked against and bad_words are tokenized with. */
export interface SamplingVocabulary {
  tokenizer: Pick<TextTokenizer, "encode">;
  vocabSize: number;
}

/** Most token sequences bad_words may become (vLLM's VLLM_MAX_NUM_BAD_WORDS default). */
export const MAX_BAD_WORDS_TOKEN_SEQUENCES = 128;

/**
 * bad_words as token sequences, by vLLM's rule (SamplingParams.update_from_tokenizer): each word
 * without leading spaces, and with one leading space when that starts a different first token of
 * the same length.
 */
function badWordsTokenIds(words: readonly string[], tokenizer: Pick<TextTokenizer, "encode">): number[][] {
  const out: number[][] = [];
  for (const word of [...new Set(words)]) {
    if (word.length === 0) throw badRequest(`bad_words cannot contain an empty string`, "bad_words");
    const plain = tokenizer.encode(word.trimStart(), { addSpecialTokens: false });
    if (plain.length === 0) throw badRequest("bad_words entries must tokenize to at least one token.", "bad_words");
    out.push(plain);
    const spaced = tokenizer.encode(" " + word.trimStart(), { addSpecialTokens: false });
    if (spaced.length === plain.length && spaced[0] !== plain[0]) out.push(spaced);
    if (out.length > MAX_BAD_WORDS_TOKEN_SEQUENCES) {
      throw badRequest(
        `Too many bad words after tokenization: ${out.length}. The max number is ${MAX_BAD_WORDS_TOKEN_SEQUENCES}.`,
        "bad_words",
      );
    }
  }
  return out;
}

/** Refuses token ids outside the vocabulary with vLLM's message. */
function checkVocabulary(field: string, ids: readonly number[], vocabSize: number): void {
  const bad = ids.filter((id) => id >= vocabSize);
  if (bad.length > 0) {
    throw badRequest(
      `token_id(s) ${JSON.stringify(bad)} in ${field} contain out-of-vocab token ids. Vocabulary size: ${vocabSize}`,
      field,
    );
  }
}

// resolveSamplingParams names camelCase fields; clients know the snake_case ones.
const FIELD_NAMES: Record<string, string> = {
  maxTokens: "max_tokens",
  minTokens: "min_tokens",
  topK: "top_k",
  topP: "top_p",
  stopTokenIds: "stop_token_ids",
  temperature: "temperature",
  seed: "seed",
  stop: "stop",
  topLogprobs: "top_logprobs",
  minP: "min_p",
  presencePenalty: "presence_penalty",
  frequencyPenalty: "frequency_penalty",
  repetitionPenalty: "repetition_penalty",
  logitBias: "logit_bias",
  allowedTokenIds: "allowed_token_ids",
  badWordsTokenIds: "bad_words",
};

/**
 * Builds and checks SamplingParams; `maxTokens` and `logprobs` (false, or the number of top
 * alternatives with the chosen token's logprob) are resolved by the route, and so is `constraint`
 * when it does not come from the body's structured-output fields (a forced tool choice).
 */
export function toSamplingParams(
  body: SamplingFields,
  maxTokens: number,
  logprobs: false | number,
  vocabulary: SamplingVocabulary,
  constraint: GrammarSpec | null = grammarSpecOf(body)?.spec ?? null,
): SamplingParams {
  const stop = body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
  const logitBias = Object.entries(body.logit_bias ?? {}).map(([id, bias]): [number, number] => [Number(id), bias]);
  checkVocabulary("logit_bias", logitBias.map(([id]) => id), vocabulary.vocabSize);
  if (body.allowed_token_ids != null) {
    if (body.allowed_token_ids.length === 0) {
      throw badRequest("allowed_token_ids is not None and empty!", "allowed_token_ids");
    }
    checkVocabulary("allowed_token_ids", body.allowed_token_ids, vocabulary.vocabSize);
  }
  const badWords = badWordsTokenIds(body.bad_words ?? [], vocabulary.tokenizer);
  checkVocabulary("bad_words", badWords.flat(), vocabulary.vocabSize);
  const partial: Partial<SamplingParams> = {
    maxTokens,
    logprobs: logprobs !== false,
    topLogprobs: logprobs === false ? 0 : logprobs,
    logitBias,
    badWordsTokenIds: badWords,
    ...(body.allowed_token_ids != null ? { allowedTokenIds: body.allowed_token_ids } : {}),
    stop: stop.filter((s) => s.length > 0),
    stopTokenIds: body.stop_token_ids ?? [],
    ignoreEos: body.ignore_eos ?? false,
    minTokens: body.min_tokens ?? 0,
    skipSpecialTokens: body.skip_special_tokens ?? true,
  };
  if (constraint) partial.structuredOutput = constraint;
  if (body.temperature != null) partial.temperature = body.temperature;
  if (body.top_p != null) partial.topP = body.top_p;
  if (body.top_k != null) partial.topK = body.top_k;
  if (body.seed != null) partial.seed = body.seed;
  if (body.presence_penalty != null) partial.presencePenalty = body.presence_penalty;
  if (body.frequency_penalty != null) partial.frequencyPenalty = body.frequency_penalty;
  if (body.repetition_penalty != null) partial.repetitionPenalty = body.repetition_penalty;
  if (body.min_p != null) partial.minP = body.min_p;
  try {
    return resolveSamplingParams(partial);
  } catch (err) {
    if (!(err instanceof RangeError || err instanceof TypeError)) throw err;
    const field = Object.keys(FIELD_NAMES).find((k) => err.message.startsWith(k));
    const param = field ? FIELD_NAMES[field]! : null;
    const message = field ? param + err.message.slice(field.length) : err.message;
    throw badRequest(message.replace(/\bmaxTokens\b/g, "max_tokens").replace(/\bminTokens\b/g, "min_tokens"), param);
  }
}

/** The params of choice `index` of n: seeds step by one so seeded choices differ but stay reproducible. */
export function paramsForChoice(params: SamplingParams, index: number): SamplingParams {
  return params.seed === undefined ? params : { ...params, seed: params.seed + index };
}

/** Rejects a request whose prompt plus completion cannot fit the model's context. */
export function checkContextLength(
  promptTokens: number,
  maxTokens: number,
  maxModelLen: number,
  promptParam: string,
): void {
  if (promptTokens >= maxModelLen) {
    throw badRequest(
      `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${promptTokens} input tokens. Please reduce the length of the input.`,
      promptParam,
    );
  }
  if (promptTokens + maxTokens > maxModelLen) {
    throw badRequest(
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${
        promptTokens + maxTokens
      } tokens ` +
        `(${promptTokens} in the ${
          promptParam === "messages" ? "messages" : "prompt"
        }, ${maxTokens} in the completion). ` +
        "Please reduce the length of the input or completion.",
      "max_tokens",
    );
  }
}
