/**
 * Every request field of vLLM's /v1/completions and /v1/chat/completions (CompletionRequest and
 * ChatCompletionRequest in vLLM's OpenAI server), each with what LMPool does with it: the same as
 * vLLM, differently (and how), or refused with a 400 that names it. Nothing is accepted and
 * ignored. README's server section is this table as requestFieldsMarkdown renders it, and a test
 * holds the schemas (schemas.ts) to it: a schema has exactly the fields its rows list, and every
 * refused row's example value gets a 400 naming the field.
 * @module
 */

/** What LMPool does with a field. */
export type FieldVerdict = "same" | "differs" | "refused";

/** Which endpoints have the field. */
export type FieldEndpoints = "both" | "completions" | "chat";

/** One row of the table. */
export interface RequestFieldRow {
  field: string;
  endpoints: FieldEndpoints;
  verdict: FieldVerdict;
  /** How it differs, what is refused, or a short note. */
  note: string;
  /**
   * For refused rows: a value that gets a 400 naming the field (the values that mean "off" are
   * accepted, since they ask for nothing LMPool lacks).
   */
  refusedExample?: unknown;
}

const row = (
  field: string,
  endpoints: FieldEndpoints,
  verdict: FieldVerdict,
  note: string,
  refusedExample?: unknown,
): RequestFieldRow => ({ field, endpoints, verdict, note, ...(verdict === "refused" ? { refusedExample } : {}) });

/** The table, in vLLM's field order (completions first, then the chat-only fields). */
export const REQUEST_FIELDS: readonly RequestFieldRow[] = [
  row("model", "both", "same", "absent means the served model; another name is a 404"),
  row("prompt", "completions", "same", "text, texts, token ids or lists of token ids"),
  row(
    "messages",
    "chat",
    "differs",
    "text content only (`text` parts); assistant `tool_calls` (arguments: JSON text, parsed for the template) and `tool_call_id` are rendered as the template does; a message's `name`, `reasoning`, `reasoning_content` and non-text parts are refused with 400",
  ),
  row(
    "echo",
    "both",
    "same",
    "completions: the prompt before the text (streamed: with each choice's first chunk); with `logprobs` the prompt tokens' logprobs come first (the first token's null, the rest with the `logprobs` alternatives, or `prompt_logprobs`' when given) and the choice carries `prompt_logprobs`; `max_tokens` 0 returns the prompt alone (one token is generated and dropped, as in vLLM); chat: the last message's content before the reply when the roles match",
  ),
  row("frequency_penalty", "both", "same", "a float32 in [-2, 2], applied on the device over the output tokens"),
  row("presence_penalty", "both", "same", "a float32 in [-2, 2], applied on the device over the output tokens"),
  row("repetition_penalty", "both", "same", "a float32 > 0, applied on the device over prompt and output tokens"),
  row("logit_bias", "both", "same", "token id -> bias, clamped to [-100, 100]; an id outside the vocabulary is a 400"),
  row(
    "logprobs",
    "completions",
    "same",
    "0 to 20: the chosen token's logprob and the k most likely alternatives per position (top-k of the raw log-softmax, on the device)",
  ),
  row("logprobs", "chat", "same", "the chosen token's logprob per token"),
  row("top_logprobs", "chat", "same", "0 to 20 alternatives per token; needs `logprobs: true`"),
  row(
    "max_tokens",
    "both",
    "same",
    "completions default 16, 0 only with `echo`; chat default: the rest of the context",
  ),
  row("max_completion_tokens", "chat", "same", "wins over max_tokens"),
  row("n", "both", "differs", "at most 128"),
  row("seed", "both", "differs", `an integer in [0, 2^53 - 128] (vLLM: any int64)`),
  row("stop", "both", "differs", "at most 64 strings; empty strings are dropped"),
  row("stream", "both", "same", ""),
  row(
    "stream_options",
    "both",
    "differs",
    "`include_usage`, `continuous_usage_stats` (usage so far on every chunk); only with `stream: true`; `continuous_usage_stats` without `include_usage` is refused with 400 (vLLM ignores it)",
  ),
  row("suffix", "completions", "refused", "only null", "x"),
  row("temperature", "both", "same", "a finite float32 >= 0"),
  row("top_p", "both", "same", "in (0, 1]"),
  row(
    "user",
    "both",
    "differs",
    "the session id for session-affinity routing when no `x-session-id` header is sent (vLLM ignores it)",
  ),
  row("use_beam_search", "both", "refused", "only false", true),
  row("best_of", "completions", "refused", "only 1 (recent vLLM releases have dropped the field)", 2),
  row("top_k", "both", "same", "0 or -1: off"),
  row("min_p", "both", "same", "in [0, 1]; greedy requests (temperature 0) take the argmax without it, as in vLLM"),
  row("watermarking", "both", "refused", "only false", true),
  row("length_penalty", "both", "refused", "only 1 (a beam-search setting)", 0.5),
  row("stop_token_ids", "both", "same", ""),
  row("include_stop_str_in_output", "both", "same", "the stop string (or the stop token's text) ends the text"),
  row("ignore_eos", "both", "same", "a structured output still ends where its grammar completes"),
  row("min_tokens", "both", "same", "EOS (unless ignore_eos) and stop_token_ids are banned from sampling until then"),
  row(
    "skip_special_tokens",
    "both",
    "same",
    "false keeps special tokens in the text (streamed too), and in the text `include_stop_str_in_output` adds for EOS",
  ),
  row(
    "spaces_between_special_tokens",
    "both",
    "same",
    "accepted either way: the byte-level BPE tokenizers LMPool loads (Qwen3, Llama 3) put no space between special tokens, which is what vLLM's fast detokenizer gives for both values",
  ),
  row(
    "truncate_prompt_tokens",
    "both",
    "same",
    'keeps the last (or with `truncation_side: "right"` the first) N prompt tokens; -1: max_model_len',
  ),
  row("truncation_side", "both", "same", '"left" (default) or "right"'),
  row("allowed_token_ids", "both", "same", "non-empty; an id outside the vocabulary is a 400"),
  row(
    "prompt_logprobs",
    "both",
    "same",
    "0 to 20 (-1, the whole vocabulary, and more than 20 are 400s, as vLLM's default max_logprobs 20 makes them); with `stream` only 0 (which shows nothing). Null for the first prompt token, then per position {token id: {logprob, rank, decoded_token}}: the prompt token (its rank over the vocabulary) first, then the k most likely (ranks 1..k); in each choice on completions, on the response on chat. Computed on the device as scored rows of the prefill steps (only k ids, logprobs and one rank per position leave it); such a request reads no cached prefix (vLLM's skip_reading_prefix_cache), so every position is computed",
  ),
  row("logprob_token_ids", "both", "refused", "only null", [1]),
  row(
    "bad_words",
    "both",
    "same",
    "tokenized as vLLM does (with and without a leading space); the last token is banned where the rest ends the output",
  ),
  row("prompt_embeds", "completions", "refused", "only null", "AAAA"),
  row("add_special_tokens", "both", "same", "completions default true, chat default false"),
  row(
    "response_format",
    "both",
    "differs",
    "`text`, `json_object` (any JSON object) and `json_schema` as in vLLM (xgrammar; any whitespace between JSON tokens); `structural_tag` is refused with 400, and so is a constraint in both this and `structured_outputs`; a schema xgrammar cannot compile is a 400 naming the field with its message",
  ),
  row(
    "structured_outputs",
    "both",
    "differs",
    "exactly one of `json` (schema object or text), `regex`, `choice`, `grammar` (xgrammar EBNF; vLLM also takes Lark) or `json_object: true`, plus `disable_any_whitespace` and `disable_fallback`; more than one, none, or any other key (`structural_tag`, `whitespace_pattern`, ...) is a 400; a constraint xgrammar cannot compile is a 400 with its message. The constraint ends at EOS only (request stop tokens are masked while it is incomplete, as in vLLM)",
  ),
  row("priority", "both", "refused", "only 0", 1),
  row(
    "request_id",
    "both",
    "same",
    "the base of the response id (the `X-Request-Id` header wins), echoed in `X-Request-Id`",
  ),
  row("session_id", "both", "differs", "the session id for session-affinity routing (wins over `user`)"),
  row("return_tokens_as_token_ids", "both", "same", "logprob tokens as `token_id:<id>`"),
  row("return_token_ids", "both", "refused", "only false", true),
  row("routed_experts_prompt_start", "both", "refused", "only 0 (no mixture-of-experts models)", 1),
  row("return_token_offsets", "both", "refused", "only false", true),
  row("return_mm_kwargs", "both", "refused", "only true (no multimodal models)", false),
  row("cache_salt", "both", "same", "1 to 1024 characters"),
  row("kv_transfer_params", "both", "refused", "only null", {}),
  row("ec_transfer_params", "both", "refused", "only null", {}),
  row("vllm_xargs", "both", "refused", "only null", { a: 1 }),
  row("repetition_detection", "both", "refused", "only null", {}),
  row("thinking_token_budget", "both", "refused", "only null or -1", 10),
  row("stream_interval", "both", "refused", "only 1 (every token is streamed as it comes)", 4),
  row(
    "tools",
    "chat",
    "differs",
    "rendered into the prompt by the chat template (also with tool_choice none, as vLLM does), as sent (vLLM re-serializes them with its defaults filled in); with `--enable-auto-tool-choice --tool-call-parser hermes` and tool_choice auto, `<tool_call>{json}</tool_call>` in the reply becomes `tool_calls` (finish_reason `tool_calls`); a reply whose calls do not all parse is plain content. Streamed: content before the first call streams as it comes, the calls arrive whole in the last chunk (vLLM streams their arguments piece by piece)",
  ),
  row(
    "tool_choice",
    "chat",
    "differs",
    '`"auto"` (default with tools; a 400 without `--enable-auto-tool-choice` and `--tool-call-parser`, as in vLLM) and `"none"` (default without tools) as in vLLM. `"required"` and a named function are held to a JSON schema built from `tools` as vLLM builds it (a named function: its `parameters`; `"required"`: an array of at least one `{"name", "parameters"}`, an anyOf over the tools) and need no server flag (vLLM\'s newest releases ask for a tool parser); the reply\'s `content` is `""` beside its `tool_calls`. A named call\'s `arguments` are the generated text, finish_reason `stop` or `length`, streamed as argument deltas as vLLM does; `"required"` calls have finish_reason `tool_calls`, and stream whole in the last chunk (vLLM streams their arguments piece by piece); a `"required"` reply cut short is returned as content with finish_reason `length` (vLLM fails the request). A function without `parameters` gets an empty object (vLLM leaves a named one unconstrained). Combined with `response_format` or `structured_outputs` it is a 400 naming `tool_choice` (vLLM lets one replace the other); a function not in `tools` is a 400 naming `tool_choice`',
  ),
  row("reasoning_effort", "chat", "refused", "only null", "low"),
  row(
    "include_reasoning",
    "chat",
    "same",
    "false leaves `reasoning` out; without `--reasoning-parser` there is none to leave out, as in vLLM",
  ),
  row("parallel_tool_calls", "chat", "same", "false keeps the first tool call only; without tools it has no effect"),
  row("add_generation_prompt", "chat", "same", "default true"),
  row(
    "continue_final_message",
    "chat",
    "same",
    "the prompt ends where the last message's content ends (transformers' rule); needs `add_generation_prompt: false`, else 400 as in vLLM",
  ),
  row("documents", "chat", "refused", "only null", [{ title: "t", text: "x" }]),
  row("chat_template", "chat", "refused", "only null", "{{ messages }}"),
  row(
    "chat_template_kwargs",
    "chat",
    "differs",
    "passed to the template (e.g. `enable_thinking`, which the qwen3 reasoning parser reads too); a variable the server sets from a request field (`messages`, `tools`, `add_generation_prompt`, ...) is refused with 400 (vLLM drops variables the template does not use)",
  ),
  row("media_io_kwargs", "chat", "refused", "only null", { image: {} }),
  row("mm_processor_kwargs", "chat", "refused", "only null", { a: 1 }),
  row("return_prompt_text", "chat", "refused", "only false", true),
];

/** The rows of one endpoint. */
export function fieldsOf(endpoint: "completions" | "chat"): RequestFieldRow[] {
  return REQUEST_FIELDS.filter((r) => r.endpoints === "both" || r.endpoints === endpoint);
}

const VERDICT_TEXT: Record<FieldVerdict, string> = { same: "same", differs: "differs", refused: "refused with 400" };

const ENDPOINT_TEXT: Record<FieldEndpoints, string> = { both: "both", completions: "completions", chat: "chat" };

/** The README table: field, endpoints, verdict, note. */
export function requestFieldsMarkdown(): string {
  const lines = [
    "| Field | Endpoints | LMPool | Note |",
    "| --- | --- | --- | --- |",
    ...REQUEST_FIELDS.map((r) =>
      `| \`${r.field}\` | ${ENDPOINT_TEXT[r.endpoints]} | ${VERDICT_TEXT[r.verdict]} | ${
        r.note.replaceAll("|", "\\|")
      } |`
    ),
    "| any other field | both | refused with 400 | vLLM ignores unknown fields with a warning; LMPool names them in a 400 |",
  ];
  return lines.join("\n");
}
