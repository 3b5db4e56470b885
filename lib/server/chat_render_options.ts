/**
 * The chat template options a chat request (or a /tokenize request with messages) asks for:
 * the generation prompt, continue_final_message, its tools and its chat_template_kwargs.
 * @module
 */
import type { ChatRenderOptions } from "../core/engine_api.ts";

/** The request fields that decide how its messages are rendered. */
export interface ChatRenderFields {
  add_generation_prompt?: boolean | null;
  continue_final_message?: boolean | null;
  tools?: readonly unknown[] | null;
  chat_template_kwargs?: Record<string, unknown> | null;
}

/**
 * The render options of a request, with vLLM's defaults: a generation prompt unless the request
 * turns it off, and tools rendered whatever tool_choice says (vLLM renders them for "none" too).
 */
export function chatRenderOptionsOf(body: ChatRenderFields): ChatRenderOptions {
  const out: ChatRenderOptions = { addGenerationPrompt: body.add_generation_prompt ?? true };
  if (body.continue_final_message === true) out.continueFinalMessage = true;
  if (body.tools != null) out.tools = body.tools;
  if (body.chat_template_kwargs != null) out.variables = body.chat_template_kwargs;
  return out;
}
