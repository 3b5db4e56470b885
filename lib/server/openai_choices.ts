/**
 * What POST /v1/completions and /v1/chat/completions share around their choices: starting them
 * from the request's common fields, and the envelope of every streamed chunk.
 * @module
 */
import type { SamplingParams } from "../core/sampling_params.ts";
import { type ChoiceRun, startChoices, type Usage } from "./choices.ts";
import { type ServerContext, sessionIdOf } from "./context.ts";
import type { RequestScope } from "./lifecycle.ts";
import type { TokenizedPrompt } from "./prompts.ts";

/** The body fields both endpoints read when starting and streaming their choices. */
export interface CommonChoiceFields {
  n?: number | null;
  user?: string | null;
  session_id?: string | null;
  cache_salt?: string | null;
  stream_options?: { include_usage?: boolean | null; continuous_usage_stats?: boolean | null } | null;
}

/** Starts `body.n` (default 1) choices per prompt, under the request's session, salt and signal. */
export function startRequestChoices(
  req: Request,
  ctx: ServerContext,
  scope: RequestScope,
  body: CommonChoiceFields,
  job: { id: string; prompts: TokenizedPrompt[]; params: SamplingParams },
): ChoiceRun[] {
  return startChoices(ctx.engine, ctx.metrics, {
    ...job,
    n: body.n ?? 1,
    sessionId: sessionIdOf(req, body.session_id ?? body.user),
    cacheSalt: body.cache_salt ?? undefined,
    signal: scope.signal,
  });
}

/** Builds a response's streamed chunks: one choice each, then (with include_usage) the usage. */
export interface ChunkEnvelope {
  /** Whether the request asked for a final usage chunk (`stream_options.include_usage`). */
  includeUsage: boolean;
  /**
   * A chunk carrying one choice: with `continuous_usage_stats` its `usage` is `usageSoFar`, else
   * `null` when usage is included (and absent when not).
   */
  choice(choice: Record<string, unknown>, usageSoFar: () => Usage): Record<string, unknown>;
  /** The final chunk: no choices, the usage. */
  usage(usage: Usage): Record<string, unknown>;
}

/** The chunk envelope of response `id` (`object` e.g. "text_completion", "chat.completion.chunk"). */
export function chunkEnvelope(
  ctx: ServerContext,
  body: CommonChoiceFields,
  head: { id: string; object: string; created: number },
): ChunkEnvelope {
  const includeUsage = body.stream_options?.include_usage === true;
  // As in vLLM, usage on every chunk is a refinement of include_usage.
  const continuous = includeUsage && body.stream_options?.continuous_usage_stats === true;
  const base = { id: head.id, object: head.object, created: head.created, model: ctx.modelName };
  return {
    includeUsage,
    choice: (choice, usageSoFar) => ({
      ...base,
      choices: [choice],
      ...(includeUsage ? { usage: continuous ? usageSoFar() : null } : {}),
    }),
    usage: (usage) => ({ ...base, choices: [], usage }),
  };
}
