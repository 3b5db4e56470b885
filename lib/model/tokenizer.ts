/**
 * The model's tokenizer: Hugging Face tokenizer.json through @huggingface/tokenizers, its EOS ids,
 * and its chat template. Implements the engine's TextTokenizer.
 * @module
 */
import { Tokenizer } from "@huggingface/tokenizers";
import { join } from "node:path";
import { ModelFormatError } from "../core/errors.ts";
import type { ChatMessage, TextTokenizer } from "../core/engine_api.ts";
import { pathExists, readText } from "../runtime/files.ts";
import { ChatTemplate, chatTemplateFromConfig, type ChatTemplateOptions, specialTokenText } from "./chat_template.ts";
import { TokenByteTable } from "./token_byte_table.ts";

/** Options of ModelTokenizer. */
export interface ModelTokenizerOptions {
  /** EOS ids from the model's config (ModelSpec.eosTokenIds); the tokenizer's eos_token is added. */
  eosTokenIds?: readonly number[];
  /** A chat template overriding the config's (e.g. from chat_template.jinja or the command line). */
  chatTemplate?: string;
  /** For error messages. */
  source?: string;
}

/** A Hugging Face tokenizer with its chat template. */
export class ModelTokenizer implements TextTokenizer {
  readonly eosTokenIds: readonly number[];
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly #tokenizer: Tokenizer;
  readonly #chatTemplate: ChatTemplate | null;
  readonly #source: string;
  readonly #json: Record<string, unknown>;
  readonly #config: Record<string, unknown>;
  #tokenBytes: TokenByteTable | null | undefined;

  constructor(tokenizerJson: object, tokenizerConfig: Record<string, unknown>, options: ModelTokenizerOptions = {}) {
    this.#source = options.source ?? "tokenizer";
    this.#json = tokenizerJson as Record<string, unknown>;
    this.#config = tokenizerConfig;
    try {
      this.#tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
    } catch (e) {
      throw new ModelFormatError(`${this.#source}: cannot build the tokenizer: ${(e as Error).message}`, { cause: e });
    }
    this.bosToken = specialTokenText(tokenizerConfig.bos_token);
    this.eosToken = specialTokenText(tokenizerConfig.eos_token);
    const eos = [...(options.eosTokenIds ?? [])];
    const eosId = this.eosToken === null ? undefined : this.#tokenizer.token_to_id(this.eosToken);
    if (eosId !== undefined) eos.push(eosId);
    this.eosTokenIds = [...new Set(eos)];
    const template = options.chatTemplate ?? chatTemplateFromConfig(tokenizerConfig);
    this.#chatTemplate = template === null
      ? null
      : new ChatTemplate(template, { bosToken: this.bosToken, eosToken: this.eosToken });
  }

  /** Loads tokenizer.json, tokenizer_config.json and chat_template.jinja (when present) of `dir`. */
  static fromDir(dir: string, options: Omit<ModelTokenizerOptions, "source"> = {}): ModelTokenizer {
    const read = (file: string): Record<string, unknown> => {
      try {
        return JSON.parse(readText(join(dir, file)));
      } catch (e) {
        throw new ModelFormatError(`${join(dir, file)}: cannot read JSON (${(e as Error).message})`, { cause: e });
      }
    };
    if (!pathExists(join(dir, "tokenizer.json"))) throw new ModelFormatError(`${dir}: no tokenizer.json`);
    const config = pathExists(join(dir, "tokenizer_config.json")) ? read("tokenizer_config.json") : {};
    const jinjaPath = join(dir, "chat_template.jinja");
    const chatTemplate = options.chatTemplate ?? (pathExists(jinjaPath) ? readText(jinjaPath) : undefined);
    return new ModelTokenizer(read("tokenizer.json"), config, { ...options, chatTemplate, source: dir });
  }

  /** Token ids of `text` (special tokens written in the text are recognized). */
  encode(text: string, options: { addSpecialTokens?: boolean } = {}): number[] {
    return this.#tokenizer.encode(text, { add_special_tokens: options.addSpecialTokens ?? true }).ids;
  }

  /** Text of `ids`; special tokens are kept unless skipSpecialTokens. Unknown ids decode to "". */
  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    if (ids.length === 0) return "";
    return this.#tokenizer.decode(ids as number[], { skip_special_tokens: options.skipSpecialTokens ?? false });
  }

  /**
   * Each token's UTF-8 bytes when this tokenizer's decode is their concatenation (byte-level BPE),
   * else null; built on first use, since only streaming detokenization needs it.
   */
  get tokenBytes(): TokenByteTable | null {
    if (this.#tokenBytes === undefined) {
      this.#tokenBytes = TokenByteTable.build(
        this.#json,
        this.#config,
        (ids, o) => this.decode(ids, o),
      );
    }
    return this.#tokenBytes;
  }

  /** The id of a token string, or undefined. */
  tokenToId(token: string): number | undefined {
    return this.#tokenizer.token_to_id(token);
  }

  /** True when the model has a chat template. */
  get hasChatTemplate(): boolean {
    return this.#chatTemplate !== null;
  }

  /** Renders chat messages with the model's template. */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    if (!this.#chatTemplate) throw new ModelFormatError(`${this.#source}: the model has no chat template`);
    return this.#chatTemplate.render(messages, options);
  }
}
