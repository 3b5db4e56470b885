/**
 * A model's chat template (Jinja, from tokenizer_config.json or chat_template.jinja) rendered with
 * @huggingface/jinja, with the variables Hugging Face passes: messages, add_generation_prompt,
 * bos_token, eos_token, tools, plus caller extras (enable_thinking, ...), and transformers'
 * continue_final_message (the rendered text ends where the last message's content ends).
 * @module
 */
import { Template } from "@huggingface/jinja";
import { ModelFormatError } from "../core/errors.ts";
import type { ChatMessage, ChatRenderOptions } from "../core/engine_api.ts";

/**
 * Options of ChatTemplate.render: addGenerationPrompt (default false, as in transformers),
 * continueFinalMessage (the text is cut right after the last message's content, as transformers'
 * continue_final_message does), tools (the `tools` variable), variables (e.g. enable_thinking).
 */
export type ChatTemplateOptions = ChatRenderOptions;

/** Why a conversation cannot be rendered as asked (the caller's fault, not the template's). */
export class ChatTemplateInputError extends Error {
  override name = "ChatTemplateInputError";
}

/**
 * transformers' continue_final_message: the rendered text up to the end of the last message's
 * content (its last occurrence; retried with the content trimmed, as templates may trim it).
 */
function cutAfterFinalContent(rendered: string, content: string): string {
  for (const c of [content, content.trim()]) {
    if (c === "") continue;
    const at = rendered.lastIndexOf(c);
    if (at >= 0) return rendered.slice(0, at + c.length);
  }
  throw new ChatTemplateInputError(
    "continue_final_message: the final message's content does not appear in the rendered prompt (an empty final message cannot be continued)",
  );
}

/** A compiled chat template. */
export class ChatTemplate {
  readonly #template: Template;

  constructor(
    readonly source: string,
    readonly specialTokens: { bosToken: string | null; eosToken: string | null } = { bosToken: null, eosToken: null },
  ) {
    try {
      this.#template = new Template(source);
    } catch (e) {
      throw new ModelFormatError(`chat template does not parse: ${(e as Error).message}`, { cause: e });
    }
  }

  /** Renders `messages` into the prompt text the model expects. */
  render(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    if (options.continueFinalMessage && options.addGenerationPrompt) {
      throw new ChatTemplateInputError("continue_final_message and add_generation_prompt cannot both be true");
    }
    const rendered = this.#template.render({
      ...options.variables,
      ...(options.tools ? { tools: options.tools.map((t) => structuredClone(t)) } : {}),
      messages: messages.map((m) => structuredClone(m)),
      add_generation_prompt: options.addGenerationPrompt ?? false,
      bos_token: this.specialTokens.bosToken ?? "",
      eos_token: this.specialTokens.eosToken ?? "",
    });
    if (!options.continueFinalMessage) return rendered;
    const last = messages.at(-1);
    if (!last) throw new ChatTemplateInputError("continue_final_message needs at least one message");
    return cutAfterFinalContent(rendered, last.content);
  }
}

/**
 * The template text of a tokenizer_config.json: a string, or a list of {name, template} of which
 * "default" is used. Null when the config has none.
 */
export function chatTemplateFromConfig(tokenizerConfig: Record<string, unknown>): string | null {
  const t = tokenizerConfig.chat_template;
  if (t == null) return null;
  if (typeof t === "string") return t;
  if (Array.isArray(t)) {
    const named = t as { name?: unknown; template?: unknown }[];
    const pick = named.find((x) => x?.name === "default") ?? named[0];
    if (typeof pick?.template === "string") return pick.template;
  }
  throw new ModelFormatError(`tokenizer_config.json: chat_template is neither a string nor a list of {name, template}`);
}

/** The text of a special-token entry of tokenizer_config.json (a string or an AddedToken object). */
export function specialTokenText(entry: unknown): string | null {
  if (typeof entry === "string") return entry;
  if (entry && typeof entry === "object" && typeof (entry as { content?: unknown }).content === "string") {
    return (entry as { content: string }).content;
  }
  return null;
}
