/**
 * POST /v1/completions: legacy text completions, non-streaming and SSE, n choices per prompt.
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
import type { TopLogprob } from "../core/outputs.ts";
import { completionLogprobs } from "./logprobs.ts";
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
  const maxTokens = body.max_tokens ?? DEFAULT_MAX_TOKENS;
  prompts.forEach((p, i) =>
    checkContextLength(p.tokenIds.length, maxTokens, maxModelLen, prompts.length > 1 ? `prompt[${i}]` : "prompt")
  );
  if (body.echo && body.logprobs != null) {
    throw badRequest("echo together with logprobs is not supported yet (prompt logprobs are not computed)", "echo");
  }
  const constraint = grammarSpecOf(body);
  const params = toSamplingParams(body, maxTokens, body.logprobs ?? false, {
    tokenizer: engine.tokenizer,
    vocabSize: engine.model.vocabSize,
  }, constraint?.spec ?? null);
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
  };
  if (body.stream) {
    const envelope = chunkEnvelope(ctx, body, { id, object: "text_completion", created: prepared.created });
    return sseResponse(streamChunks(ctx, prepared, envelope), scope, {
      usageSoFar: () => usageSoFar(prepared, envelope),
    });
  }
  return Response.json(await completeAll(ctx, prepared, scope));
}

function logprobsOf(
  ctx: ServerContext,
  body: CompletionRequest,
  ids: number[],
  lps: number[],
  offset: number,
  top: TopLogprob[][] | undefined,
) {
  if (body.logprobs == null) return null;
  return completionLogprobs(ctx.engine.tokenizer, ids, lps, offset, body.return_tokens_as_token_ids === true, {
    k: body.logprobs,
    ...(top ? { perToken: top } : {}),
  });
}

async function completeAll(ctx: ServerContext, p: Prepared, scope: RequestScope) {
  const finished = await collectChoices(p.runs, (e) => scope.abort(e));
  let completionTokens = 0;
  const choices = [];
  for (const c of finished) {
    completionTokens += c.tokenIds.length;
    const echo = p.body.echo ? (c.prompt.text ?? await ctx.tokenizer.decode(c.prompt.tokenIds)) : "";
    const ending = await choiceEnding(p.ending, c.tokenIds, c.text, c.finishReason);
    choices.push({
      index: c.index,
      text: echo + c.text + ending.includedText,
      logprobs: logprobsOf(ctx, p.body, c.tokenIds, c.logprobs, echo.length, c.topLogprobs),
      finish_reason: openAIFinishReason(c.finishReason),
      stop_reason: ending.stopReason,
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
  const echoed = new Map<number, number>();
  if (p.body.echo) {
    for (const r of p.runs) {
      const text = r.prompt.text ?? await ctx.tokenizer.decode(r.prompt.tokenIds);
      echoed.set(r.index, text.length);
      yield chunk({ index: r.index, text, logprobs: null, finish_reason: null, stop_reason: null });
    }
  }
  const seen = new Map<number, StreamedChoice>();
  for await (const { run, delta } of mergeChoices(p.runs)) {
    p.completionTokens += delta.tokenIds.length;
    let s = seen.get(run.index);
    if (!s) seen.set(run.index, s = { tokenIds: [], text: "" });
    const offset = (echoed.get(run.index) ?? 0) + s.text.length;
    s.tokenIds.push(...delta.tokenIds);
    s.text += delta.text;
    if (!delta.finished && delta.text === "" && (!withLogprobs || delta.tokenIds.length === 0)) continue;
    let ending: ChoiceEnding = { stopReason: null, includedText: "" };
    if (delta.finished) ending = await choiceEnding(p.ending, s.tokenIds, s.text, delta.finishReason ?? "stop");
    yield chunk({
      index: run.index,
      text: delta.text + ending.includedText,
      logprobs: withLogprobs
        ? logprobsOf(ctx, p.body, delta.tokenIds, delta.logprobs ?? [], offset, delta.topLogprobs)
        : null,
      finish_reason: delta.finished ? openAIFinishReason(delta.finishReason ?? "stop") : null,
      stop_reason: ending.stopReason,
    });
  }
  if (envelope.includeUsage) yield envelope.usage(usage());
}
