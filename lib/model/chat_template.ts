/**
 * A model's chat template (Jinja, from tokenizer_config.json or chat_template.jinja) rendered with
 * @huggingface/jinja, with the variables Hugging Face passes: messages, add_generation_prompt,
 * bos_token, eos_token, plus caller extras (tools, enable_thinking, ...).
 * @module
 */
import { Template } from "@huggingface/jinja";
import { ModelFormatError } from "../core/errors.ts";
import type { ChatMessage } from "../core/engine_api.ts";

/** Options of ChatTemplate.render. */
export interface ChatTemplateOptions {
  /** Append the assistant turn's opening (default false, as in transformers). */
  addGenerationPrompt?: boolean;
  /** Extra template variables, e.g. { enable_thinking: false } or { tools: [...] }. */
  variables?: Record<string, unknown>;
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
    return this.#template.render({
      ...options.variables,
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: options.addGenerationPrompt ?? false,
      bos_token: this.specialTokens.bosToken ?? "",
      eos_token: this.specialTokens.eosToken ?? "",
    });
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
