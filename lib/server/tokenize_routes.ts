/**
 * POST /tokenize and POST /detokenize in vLLM's request and response shapes.
 * @module
 */
import { chatRenderOptionsOf } from "./chat_render_options.ts";
import { checkModel, parseJsonBody, promptContext, type ServerContext } from "./context.ts";
import { badRequest } from "./errors.ts";
import type { RequestScope } from "./lifecycle.ts";
import { chatTokenIds, checkPromptChars } from "./prompts.ts";
import { detokenizeRequestSchema, tokenizeRequestSchema } from "./schemas.ts";

/** Handles POST /tokenize: `{prompt}` or `{messages}` -> `{count, max_model_len, tokens}`. */
export async function handleTokenize(req: Request, ctx: ServerContext, scope: RequestScope): Promise<Response> {
  const body = await parseJsonBody(req, ctx, tokenizeRequestSchema);
  checkModel(ctx, body.model);
  const pctx = promptContext(ctx, scope);
  let tokens: number[];
  if (body.messages !== undefined) {
    tokens = await chatTokenIds(body.messages, pctx, {
      ...chatRenderOptionsOf(body),
      addSpecialTokens: body.add_special_tokens ?? false,
    });
  } else {
    const prompt = body.prompt ?? "";
    checkPromptChars(prompt.length, pctx, "prompt");
    tokens = await ctx.tokenizer.encode(prompt, {
      addSpecialTokens: body.add_special_tokens ?? true,
      signal: scope.signal,
    });
  }
  return Response.json({ count: tokens.length, max_model_len: ctx.engine.model.maxModelLen, tokens, token_strs: null });
}

/** Handles POST /detokenize: `{tokens}` -> `{prompt}`. */
export async function handleDetokenize(req: Request, ctx: ServerContext, scope: RequestScope): Promise<Response> {
  const body = await parseJsonBody(req, ctx, detokenizeRequestSchema);
  checkModel(ctx, body.model);
  const vocab = ctx.engine.model.vocabSize;
  const bad = body.tokens.findIndex((t) => t >= vocab);
  if (bad >= 0) {
    throw badRequest(
      `tokens[${bad}] is ${body.tokens[bad]}, outside the vocabulary (size ${vocab})`,
      `tokens[${bad}]`,
    );
  }
  return Response.json({ prompt: await ctx.tokenizer.decode(body.tokens, { signal: scope.signal }) });
}
