/**
 * POST /v1/completions: legacy text completions, non-streaming and SSE, n choices per prompt.
 * @module
 */
import { type ChoiceRun, collectChoices, mergeChoices, openAIFinishReason, usageOf } from "./choices.ts";
import { checkModel, newResponseId, parseJsonBody, promptContext, type ServerContext, unixSeconds } from "./context.ts";
import { badRequest } from "./errors.ts";
import type { RequestScope } from "./lifecycle.ts";
import { completionLogprobs } from "./logprobs.ts";
import { type ChunkEnvelope, chunkEnvelope, startRequestChoices } from "./openai_choices.ts";
import { completionPrompts, type TokenizedPrompt } from "./prompts.ts";
import { checkContextLength, toSamplingParams } from "./sampling.ts";
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
  const prompts = await completionPrompts(body.prompt, promptContext(ctx, scope));
  const maxTokens = body.max_tokens ?? DEFAULT_MAX_TOKENS;
  prompts.forEach((p, i) =>
    checkContextLength(
      p.tokenIds.length,
      maxTokens,
      engine.model.maxModelLen,
      prompts.length > 1 ? `prompt[${i}]` : "prompt",
    )
  );
  if (body.echo && body.logprobs != null) {
    throw badRequest("echo together with logprobs is not supported (prompt logprobs are not computed)", "echo");
  }
  const params = toSamplingParams(body, maxTokens, body.logprobs != null);
  const id = newResponseId("cmpl");
  const runs = startRequestChoices(req, ctx, scope, body, { id, prompts, params });
  const prepared: Prepared = { body, prompts, runs, id, created: unixSeconds(), completionTokens: 0 };
  if (body.stream) {
    const envelope = chunkEnvelope(ctx, body, { id, object: "text_completion", created: prepared.created });
    return sseResponse(streamChunks(ctx, prepared, envelope), scope, {
      usageSoFar: () => usageSoFar(prepared, envelope),
    });
  }
  return Response.json(await completeAll(ctx, prepared, scope));
}

async function completeAll(ctx: ServerContext, p: Prepared, scope: RequestScope) {
  const finished = await collectChoices(p.runs, (e) => scope.abort(e));
  const withLogprobs = p.body.logprobs != null;
  let completionTokens = 0;
  const choices = finished.map((c) => {
    completionTokens += c.tokenIds.length;
    const echo = p.body.echo ? (c.prompt.text ?? ctx.engine.tokenizer.decode(c.prompt.tokenIds)) : "";
    return {
      index: c.index,
      text: echo + c.text,
      logprobs: withLogprobs
        ? completionLogprobs(ctx.engine.tokenizer, c.tokenIds, c.logprobs, 0, (p.body.logprobs ?? 0) > 0)
        : null,
      finish_reason: openAIFinishReason(c.finishReason),
    };
  });
  return {
    id: p.id,
    object: "text_completion",
    created: p.created,
    model: ctx.modelName,
    choices,
    usage: usageOf(p.prompts, completionTokens),
  };
}

async function* streamChunks(ctx: ServerContext, p: Prepared, envelope: ChunkEnvelope): AsyncGenerator<unknown> {
  const withLogprobs = p.body.logprobs != null;
  const chunk = envelope.choice;
  if (p.body.echo) {
    for (const r of p.runs) {
      yield chunk({
        index: r.index,
        text: r.prompt.text ?? ctx.engine.tokenizer.decode(r.prompt.tokenIds),
        logprobs: null,
        finish_reason: null,
      });
    }
  }
  const textOffsets = new Map<number, number>();
  for await (const { run, delta } of mergeChoices(p.runs)) {
    p.completionTokens += delta.tokenIds.length;
    if (!delta.finished && delta.text === "" && (!withLogprobs || delta.tokenIds.length === 0)) continue;
    const offset = textOffsets.get(run.index) ?? 0;
    textOffsets.set(run.index, offset + delta.text.length);
    yield chunk({
      index: run.index,
      text: delta.text,
      logprobs: withLogprobs
        ? completionLogprobs(
          ctx.engine.tokenizer,
          delta.tokenIds,
          delta.logprobs ?? [],
          offset,
          (p.body.logprobs ?? 0) > 0,
        )
        : null,
      finish_reason: delta.finished ? openAIFinishReason(delta.finishReason ?? "stop") : null,
    });
  }
  if (envelope.includeUsage) yield envelope.usage(usageOf(p.prompts, p.completionTokens));
}
