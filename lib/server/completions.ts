/**
 * POST /v1/completions: legacy text completions, non-streaming and SSE, n choices per prompt. With
 * echo the prompt comes first (in a stream, with each choice's first delta, as vLLM sends it), and
 * with echo and logprobs the prompt tokens' logprobs come before the generated ones; `max_tokens` 0
 * with echo returns the prompt alone (vLLM generates one token and drops it).
 * @module
 */
import { type ChoiceEnding, choiceEnding, type EndingContext, endingContext } from "./choice_endings.ts";
import { type ChoiceRun, collectChoices, mergeChoices, openAIFinishReason, usageOf } from "./choices.ts";
import {
  checkModel,
  newResponseId,
  parseJsonBody,
  promptContext,
  responseIdOf,
  type ServerContext,
  unixSeconds,
} from "./context.ts";
import { badRequest } from "./errors.ts";
import type { RequestScope } from "./lifecycle.ts";
import type { PromptLogprob, TopLogprob } from "../core/outputs.ts";
import { type CompletionLogprobs, completionLogprobs } from "./logprobs.ts";
import { orderedJsonResponse } from "./ordered_json.ts";
import { concatLogprobs, echoedPromptLogprobs, promptLogprobsJson, promptLogprobsOf } from "./prompt_logprobs.ts";
import { type ChunkEnvelope, chunkEnvelope, startRequestChoices } from "./openai_choices.ts";
import { completionPrompts, promptTruncationOf, type TokenizedPrompt } from "./prompts.ts";
import { checkContextLength, toSamplingParams } from "./sampling.ts";
import { checkStructuredOutput, grammarSpecOf } from "./structured_outputs.ts";
import { type CompletionRequest, completionRequestSchema } from "./schemas.ts";
import { sseResponse } from "./sse.ts";

/** vLLM's default max_tokens for completions. */
const DEFAULT_MAX_TOKENS = 16;

interface Prepared {
  body: CompletionRequest;
  prompts: TokenizedPrompt[];
  runs: ChoiceRun[];
  id: string;
  created: number;
  ending: EndingContext;
  /** Tokens streamed so far (the usage of a stream that ends early). */
  completionTokens: number;
  /** The alternatives per prompt position the engine computes (prompt_logprobs, or echo's logprobs). */
  promptK: number | undefined;
  /** echo with max_tokens 0: the prompt alone. */
  promptOnly: boolean;
}

/** The usage chunk of a stream that ends now (undefined unless the client asked for usage). */
function usageSoFar(p: Prepared, envelope: ChunkEnvelope): unknown {
  return envelope.includeUsage ? envelope.usage(usageOf(p.prompts, p.completionTokens)) : undefined;
}

/** Handles POST /v1/completions. */
export async function handleCompletions(req: Request, ctx: ServerContext, scope: RequestScope): Promise<Response> {
  const body = await parseJsonBody(req, ctx, completionRequestSchema);
  checkModel(ctx, body.model);
  const { engine } = ctx;
  const maxModelLen = engine.model.maxModelLen;
  const id = responseIdOf(req, "cmpl", body.request_id);
  const prompts = await completionPrompts(body.prompt, promptContext(ctx, scope), {
    addSpecialTokens: body.add_special_tokens ?? true,
    truncation: promptTruncationOf(body, maxModelLen),
  });
  const promptOnly = body.max_tokens === 0;
  if (promptOnly && !body.echo) throw badRequest("max_tokens must be at least 1, got 0.", "max_tokens");
  // As vLLM: the prompt alone still samples one token (then dropped).
  const maxTokens = promptOnly ? 1 : body.max_tokens ?? DEFAULT_MAX_TOKENS;
  prompts.forEach((p, i) =>
    checkContextLength(p.tokenIds.length, maxTokens, maxModelLen, prompts.length > 1 ? `prompt[${i}]` : "prompt")
  );
  // echo with logprobs asks for the prompt's logprobs too (vLLM's to_sampling_params); a stream
  // never shows prompt_logprobs, so it computes them only for that.
  const echoLogprobs = body.echo === true && body.logprobs != null;
  const asked = promptLogprobsOf(body, engine.model.vocabSize);
  const promptK = !body.stream || echoLogprobs ? asked ?? (echoLogprobs ? body.logprobs! : undefined) : undefined;
  const constraint = grammarSpecOf(body);
  const params = {
    ...toSamplingParams(body, maxTokens, body.logprobs ?? false, {
      tokenizer: engine.tokenizer,
      vocabSize: engine.model.vocabSize,
    }, constraint?.spec ?? null),
    ...(promptK !== undefined ? { promptLogprobs: promptK } : {}),
  };
  if (constraint) await checkStructuredOutput(constraint.spec, constraint.field);
  // The engine's ids stay unique even when clients reuse a request id.
  const runs = startRequestChoices(req, ctx, scope, body, { id: newResponseId("cmpl"), prompts, params });
  const prepared: Prepared = {
    body,
    prompts,
    runs,
    id,
    created: unixSeconds(),
    ending: endingContext(ctx, body, params),
    completionTokens: 0,
    promptK,
    promptOnly,
  };
  if (body.stream) {
    const envelope = chunkEnvelope(ctx, body, { id, object: "text_completion", created: prepared.created });
    return sseResponse(streamChunks(ctx, prepared, envelope), scope, {
      usageSoFar: () => usageSoFar(prepared, envelope),
    });
  }
  const response = await completeAll(ctx, prepared, scope);
  return promptK === undefined ? Response.json(response) : orderedJsonResponse(response);
}

/** What one piece of a choice's logprobs covers: its tokens, and the prompt's when it is echoed. */
interface LogprobsPiece {
  ids: readonly number[];
  lps: readonly number[];
  top: TopLogprob[][] | undefined;
  /** Where the piece starts in the choice's text. */
  offset: number;
  /** With echo: the prompt, which comes first (its positions from `offset`). */
  echoed?: { tokenIds: readonly number[]; entries: readonly (PromptLogprob | null)[] };
}

function logprobsOf(ctx: ServerContext, p: Prepared, piece: LogprobsPiece): CompletionLogprobs | null {
  const body = p.body;
  if (body.logprobs == null) return null;
  const tokenizer = ctx.engine.tokenizer;
  const asTokenIds = body.return_tokens_as_token_ids === true;
  let offset = piece.offset;
  let head: CompletionLogprobs | null = null;
  if (piece.echoed) {
    const k = { prompt: p.promptK ?? body.logprobs, output: body.logprobs };
    head = echoedPromptLogprobs(tokenizer, piece.echoed.tokenIds, piece.echoed.entries, k, asTokenIds, offset);
    offset = head.text_offset.at(-1)! + head.tokens.at(-1)!.length;
    if (p.promptOnly) return head;
  }
  const out = completionLogprobs(tokenizer, piece.ids, piece.lps, offset, asTokenIds, {
    k: body.logprobs,
    ...(piece.top ? { perToken: piece.top } : {}),
  });
  return head ? concatLogprobs(head, out) : out;
}

async function completeAll(ctx: ServerContext, p: Prepared, scope: RequestScope) {
  const finished = await collectChoices(p.runs, (e) => scope.abort(e));
  let completionTokens = 0;
  const choices = [];
  for (const c of finished) {
    completionTokens += c.tokenIds.length;
    const echo = p.body.echo ? (c.prompt.text ?? await ctx.tokenizer.decode(c.prompt.tokenIds)) : "";
    const ending = await choiceEnding(p.ending, c.tokenIds, c.text, c.finishReason);
    const entries = c.promptLogprobs ?? [];
    choices.push({
      index: c.index,
      text: p.promptOnly ? echo : echo + c.text + ending.includedText,
      logprobs: logprobsOf(ctx, p, {
        ids: c.tokenIds,
        lps: c.logprobs,
        top: c.topLogprobs,
        offset: 0,
        ...(p.body.echo ? { echoed: { tokenIds: c.prompt.tokenIds, entries } } : {}),
      }),
      finish_reason: openAIFinishReason(c.finishReason),
      stop_reason: ending.stopReason,
      // As vLLM: present with prompt_logprobs, and with echo and logprobs (which ask for them).
      ...(p.promptK !== undefined
        ? { prompt_logprobs: promptLogprobsJson(ctx.engine.tokenizer, c.prompt.tokenIds, entries, p.promptK) }
        : {}),
    });
  }
  return {
    id: p.id,
    object: "text_completion",
    created: p.created,
    model: ctx.modelName,
    choices,
    usage: usageOf(p.prompts, completionTokens),
  };
}

/** What a stream has seen of one choice: its tokens and text, for its ending. */
interface StreamedChoice {
  tokenIds: number[];
  text: string;
}

async function* streamChunks(ctx: ServerContext, p: Prepared, envelope: ChunkEnvelope): AsyncGenerator<unknown> {
  const withLogprobs = p.body.logprobs != null;
  const usage = () => usageOf(p.prompts, p.completionTokens);
  const chunk = (choice: Record<string, unknown>) => envelope.choice(choice, usage);
  // Length of each choice's echoed prompt text, once its first chunk (which carries it) went out.
  const echoed = new Map<number, number>();
  const seen = new Map<number, StreamedChoice>();
  for await (const { run, delta } of mergeChoices(p.runs)) {
    p.completionTokens += delta.tokenIds.length;
    let s = seen.get(run.index);
    if (!s) seen.set(run.index, s = { tokenIds: [], text: "" });
    const echoNow = p.body.echo === true && !echoed.has(run.index);
    const offset = (echoed.get(run.index) ?? 0) + s.text.length;
    s.tokenIds.push(...delta.tokenIds);
    s.text += delta.text;
    if (!echoNow && !delta.finished && delta.text === "" && (!withLogprobs || delta.tokenIds.length === 0)) continue;
    let ending: ChoiceEnding = { stopReason: null, includedText: "" };
    if (delta.finished) ending = await choiceEnding(p.ending, s.tokenIds, s.text, delta.finishReason ?? "stop");
    // vLLM sends the echo with the choice's first output: the prompt's text and logprobs first.
    const echo = echoNow ? (run.prompt.text ?? await ctx.tokenizer.decode(run.prompt.tokenIds)) : "";
    if (echoNow) echoed.set(run.index, echo.length);
    const echoedPrompt = echoNow
      ? { echoed: { tokenIds: run.prompt.tokenIds, entries: delta.promptLogprobs ?? [] } }
      : {};
    yield chunk({
      index: run.index,
      text: p.promptOnly ? echo : echo + delta.text + ending.includedText,
      logprobs: withLogprobs
        ? logprobsOf(ctx, p, {
          ids: delta.tokenIds,
          lps: delta.logprobs ?? [],
          top: delta.topLogprobs,
          offset,
          ...echoedPrompt,
        })
        : null,
      finish_reason: delta.finished ? openAIFinishReason(delta.finishReason ?? "stop") : null,
      stop_reason: ending.stopReason,
    });
  }
  if (envelope.includeUsage) yield envelope.usage(usage());
}
