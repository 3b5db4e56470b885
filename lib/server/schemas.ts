/**
 * Zod schemas of the request bodies the server accepts: completions, chat completions, tokenize and
 * detokenize, in the OpenAI/vLLM field names. Unknown fields are dropped (as vLLM does); known
 * fields with wrong types or out-of-range values are rejected before anything reaches the engine;
 * numbers are checked as the engine reads them (finite float32, int32) within their documented ranges.
 * `null` is accepted wherever a field is optional, since many clients send it for "unset".
 * @module
 */
import { z } from "zod";
import { float32In, int32In } from "./number_schemas.ts";

const tokenId = int32In(0);

/** Most choices per prompt (`n`). */
const MAX_CHOICES = 128;

/**
 * Largest seed: choice j of n samples with seed + j, which must stay a safe integer (what the
 * engine accepts; the native sampler takes it as a uint64).
 */
export const MAX_SEED = Number.MAX_SAFE_INTEGER - (MAX_CHOICES - 1);

/** Only the value that means "off" is accepted for features the engine does not have. */
function onlyOff(value: number, feature: string) {
  return float32In().refine((v) => v === value, { error: `${feature} is not supported; only ${value} is accepted` })
    .nullish();
}

const stopSchema = z
  .union([z.string(), z.array(z.string()).max(64)], { error: "stop must be a string or a list of strings" })
  .nullish();

const streamOptionsSchema = z.object({
  include_usage: z.boolean().nullish(),
  continuous_usage_stats: z.boolean().nullish(),
});

/** Fields shared by completions and chat completions (sampling, streaming, session). */
const commonFields = {
  model: z.string().nullish(),
  max_tokens: int32In(1).nullish(),
  temperature: float32In({ min: 0 }).nullish(),
  top_p: float32In({ min: 0, minExclusive: true, max: 1 }).nullish(),
  top_k: int32In(-1).nullish(),
  n: int32In(1, MAX_CHOICES).nullish(),
  seed: z.int().min(0).max(MAX_SEED, { error: `must be an integer in [0, ${MAX_SEED}]` }).nullish(),
  stop: stopSchema,
  stop_token_ids: z.array(tokenId).nullish(),
  ignore_eos: z.boolean().nullish(),
  min_tokens: int32In(0).nullish(),
  stream: z.boolean().nullish(),
  stream_options: streamOptionsSchema.nullish(),
  user: z.string().nullish(),
  cache_salt: z.string().min(1).nullish(),
  presence_penalty: onlyOff(0, "presence_penalty"),
  frequency_penalty: onlyOff(0, "frequency_penalty"),
  repetition_penalty: onlyOff(1, "repetition_penalty"),
  min_p: onlyOff(0, "min_p"),
  best_of: onlyOff(1, "best_of"),
  logit_bias: z.record(z.string(), float32In({ min: -100, max: 100 })).refine((m) => Object.keys(m).length === 0, {
    error: "logit_bias is not supported",
  }).nullish(),
};

/** A prompt: text, a list of texts, token ids, or a list of token-id lists. */
const promptSchema = z.union(
  [z.string(), z.array(z.string()).min(1), z.array(tokenId).min(1), z.array(z.array(tokenId).min(1)).min(1)],
  { error: "prompt must be a string, a list of strings, a list of token ids, or a list of token-id lists" },
);

/** POST /v1/completions body. */
export const completionRequestSchema = z.object({
  ...commonFields,
  prompt: promptSchema,
  /** Completions return the chosen token's logprob when this is set (top-k alternatives are not computed). */
  logprobs: int32In(0, 20).nullish(),
  echo: z.boolean().nullish(),
  suffix: z.null().optional(),
});

/** The parsed body of POST /v1/completions. */
export type CompletionRequest = z.infer<typeof completionRequestSchema>;

const textPartSchema = z.object({ type: z.literal("text"), text: z.string() });

const messageContentSchema = z.union([z.string(), z.array(textPartSchema)], {
  error: 'content must be a string or a list of text parts ({"type": "text", "text": ...})',
});

/** One chat message; `developer` is read as `system`. */
const chatMessageSchema = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: messageContentSchema.nullish(),
  name: z.string().nullish(),
});

/** A parsed chat message. */
export type ChatMessageInput = z.infer<typeof chatMessageSchema>;

/** POST /v1/chat/completions body. */
export const chatCompletionRequestSchema = z.object({
  ...commonFields,
  messages: z.array(chatMessageSchema).min(1),
  max_completion_tokens: int32In(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: int32In(0, 20).nullish(),
  add_generation_prompt: z.boolean().nullish(),
  tools: z.array(z.unknown()).max(0, { error: "tools are not supported" }).nullish(),
  response_format: z.object({
    type: z.literal("text", { error: 'only response_format {"type": "text"} is supported' }),
  }).nullish(),
});

/** The parsed body of POST /v1/chat/completions. */
export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;

/** POST /tokenize body (vLLM's shape): either `prompt` or `messages`. */
export const tokenizeRequestSchema = z
  .object({
    model: z.string().nullish(),
    prompt: z.string().optional(),
    messages: z.array(chatMessageSchema).min(1).optional(),
    add_special_tokens: z.boolean().nullish(),
    add_generation_prompt: z.boolean().nullish(),
  })
  .refine((b) => (b.prompt === undefined) !== (b.messages === undefined), {
    error: "exactly one of prompt or messages is required",
    path: ["prompt"],
  });

/** POST /detokenize body (vLLM's shape). */
export const detokenizeRequestSchema = z.object({
  model: z.string().nullish(),
  tokens: z.array(tokenId),
});
