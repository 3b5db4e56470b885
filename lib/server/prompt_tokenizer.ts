/**
 * How the server turns request text into token ids (and back): small inputs inline on the main
 * thread, where a thread hop would cost more than the work; large ones on the tokenizer pool, so a
 * multi-megabyte prompt never stalls the thread that serves HTTP and relays the workers' heartbeats.
 * Without a pool (an engine passed in-process, no model directory) everything runs inline.
 * @module
 */
import type { ChatMessage, ChatRenderOptions, TextTokenizer } from "../core/engine_api.ts";
import { badRequest } from "./errors.ts";
import type { PoolResult, TokenizerPool } from "./tokenizer_pool.ts";

/** Inputs at least this long (UTF-16 units of text, or token ids to decode) go to the pool. */
export const INLINE_LIMIT_CHARS = 8 * 1024;
const INLINE_LIMIT_IDS = 2 * 1024;

/** Tokenization as the routes need it; every method may run off the main thread. */
export interface PromptTokenizer {
  /**
   * Most input characters one token stands for (Infinity: no bound known). The server refuses a
   * text longer than max_model_len times this before tokenizing it.
   */
  readonly maxInputCharsPerToken: number;
  encode(text: string, options: { addSpecialTokens: boolean; signal?: AbortSignal }): Promise<number[]>;
  /** Renders `messages` with the chat template and encodes the result; a template refusal is a 400 on `messages`. */
  encodeChat(messages: ChatMessage[], options: ChatEncodeOptions): Promise<number[]>;
  decode(ids: readonly number[], options?: { signal?: AbortSignal }): Promise<string>;
  /** Stops the pool's threads (inline: nothing). Idempotent. */
  close(): void;
}

/** How encodeChat renders (generation prompt, continue_final_message, tools, variables) and encodes. */
export interface ChatEncodeOptions extends ChatRenderOptions {
  addSpecialTokens: boolean;
  signal?: AbortSignal;
}

/** The render options alone (what a tokenizer thread needs), without undefined entries. */
function renderOptionsOf(o: ChatEncodeOptions): ChatRenderOptions {
  const out: ChatRenderOptions = { addGenerationPrompt: o.addGenerationPrompt ?? false };
  if (o.continueFinalMessage) out.continueFinalMessage = true;
  if (o.tools) out.tools = o.tools;
  if (o.variables) out.variables = o.variables;
  return out;
}

/**
 * Per-token bound without a tokenizer.json to measure: longer than the longest vocabulary entry of
 * the tokenizers LMPool loads, with room for Unicode normalization, so it never refuses a prompt
 * that fits the context.
 */
const DEFAULT_MAX_INPUT_CHARS_PER_TOKEN = 1024;

function templateRefused(message: string) {
  // A template can reject a conversation (e.g. roles out of order); that is the request's fault.
  return badRequest(
    `messages could not be rendered with the chat template: ${message}`,
    "messages",
  );
}

function renderInline(tokenizer: TextTokenizer, messages: ChatMessage[], render: ChatRenderOptions): string {
  try {
    return tokenizer.applyChatTemplate(messages, render);
  } catch (err) {
    throw templateRefused(err instanceof Error ? err.message : String(err));
  }
}

/**
 * Characters of text a chat renders from (contents, tool calls and tool definitions, before the
 * chat template): what decides whether it is templated inline or on the pool.
 */
export function chatChars(messages: readonly ChatMessage[], tools?: readonly unknown[]): number {
  let n = tools ? JSON.stringify(tools).length : 0;
  for (const m of messages) n += m.content.length + (m.tool_calls ? JSON.stringify(m.tool_calls).length : 0);
  return n;
}

/** Everything on the calling thread. */
export function inlinePromptTokenizer(
  tokenizer: TextTokenizer,
  maxInputCharsPerToken = DEFAULT_MAX_INPUT_CHARS_PER_TOKEN,
): PromptTokenizer {
  return {
    maxInputCharsPerToken,
    encode: (text, o) => Promise.resolve().then(() => tokenizer.encode(text, { addSpecialTokens: o.addSpecialTokens })),
    encodeChat: (messages, o) =>
      Promise.resolve().then(() =>
        tokenizer.encode(renderInline(tokenizer, messages, renderOptionsOf(o)), {
          addSpecialTokens: o.addSpecialTokens,
        })
      ),
    decode: (ids) => Promise.resolve().then(() => tokenizer.decode(ids)),
    close: () => {},
  };
}

function idsOf(r: PoolResult): number[] {
  if (r.type === "failed") {
    if (r.kind === "template") throw templateRefused(r.message);
    throw new Error(`tokenizer thread: ${r.message}`);
  }
  // A plain indexed copy: Array.from over a large typed array is several times slower, and this
  // runs on the main thread.
  const ids = r.ids ?? new Int32Array(0);
  const out = new Array<number>(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = ids[i]!;
  return out;
}

/** Small inputs inline with `tokenizer`, large ones on `pool` (which this object then owns). */
export function pooledPromptTokenizer(tokenizer: TextTokenizer, pool: TokenizerPool): PromptTokenizer {
  const inline = inlinePromptTokenizer(tokenizer, pool.maxInputCharsPerToken);
  return {
    maxInputCharsPerToken: pool.maxInputCharsPerToken,
    async encode(text, o) {
      if (text.length < INLINE_LIMIT_CHARS) return inline.encode(text, o);
      return idsOf(await pool.run({ op: "encode", text, addSpecialTokens: o.addSpecialTokens }, o.signal));
    },
    async encodeChat(messages, o) {
      if (chatChars(messages, o.tools) < INLINE_LIMIT_CHARS) return inline.encodeChat(messages, o);
      return idsOf(
        await pool.run(
          { op: "chat", messages, render: renderOptionsOf(o), addSpecialTokens: o.addSpecialTokens },
          o.signal,
        ),
      );
    },
    async decode(ids, o) {
      if (ids.length < INLINE_LIMIT_IDS) return inline.decode(ids);
      const r = await pool.run({ op: "decode", ids: Int32Array.from(ids) }, o?.signal);
      if (r.type === "failed") throw new Error(`tokenizer thread: ${r.message}`);
      return r.text ?? "";
    },
    close: () => pool.close(),
  };
}
