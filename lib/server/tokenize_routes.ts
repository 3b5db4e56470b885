/**
 * POST /tokenize and POST /detokenize in vLLM's request and response shapes.
 * @module
 */
import { checkModel, parseJsonBody, type ServerContext } from "./context.ts";
import { badRequest } from "./errors.ts";
import { renderChat } from "./prompts.ts";
import { detokenizeRequestSchema, tokenizeRequestSchema } from "./schemas.ts";

/** Handles POST /tokenize: `{prompt}` or `{messages}` -> `{count, max_model_len, tokens}`. */
export async function handleTokenize(req: Request, ctx: ServerContext): Promise<Response> {
  const body = await parseJsonBody(req, tokenizeRequestSchema);
  checkModel(ctx, body.model);
  const tok = ctx.engine.tokenizer;
  let tokens: number[];
  if (body.messages !== undefined) {
    const text = renderChat(body.messages, tok, body.add_generation_prompt ?? true);
    tokens = tok.encode(text, { addSpecialTokens: body.add_special_tokens ?? false });
  } else {
    tokens = tok.encode(body.prompt ?? "", { addSpecialTokens: body.add_special_tokens ?? true });
  }
  return Response.json({ count: tokens.length, max_model_len: ctx.engine.model.maxModelLen, tokens, token_strs: null });
}

/** Handles POST /detokenize: `{tokens}` -> `{prompt}`. */
export async function handleDetokenize(req: Request, ctx: ServerContext): Promise<Response> {
  const body = await parseJsonBody(req, detokenizeRequestSchema);
  checkModel(ctx, body.model);
  const vocab = ctx.engine.model.vocabSize;
  const bad = body.tokens.findIndex((t) => t >= vocab);
  if (bad >= 0) throw badRequest(`tokens[${bad}] is ${body.tokens[bad]}, outside the vocabulary (size ${vocab})`, `tokens[${bad}]`, "invalid_token_id");
  return Response.json({ prompt: ctx.engine.tokenizer.decode(body.tokens) });
}
