/**
 * Qwen3's reasoning parser (vLLM's `--reasoning-parser qwen3`, Qwen3ReasoningParser): the text a
 * model writes between `<think>` and `</think>` is the reply's `reasoning`, the rest its content.
 * The template may put `<think>` in the prompt, so only `</think>` needs to appear in the output; a
 * leading `<think>` the model writes itself is dropped. Without `</think>` the output was cut short
 * inside its reasoning: all of it is reasoning, unless the request turned thinking off
 * (`chat_template_kwargs.enable_thinking: false`), when all of it is content.
 *
 * The streaming splitter emits, per delta, only text whose side is settled: a suffix that may be
 * the start of a tag waits for the next delta, so the streamed pieces add up to exactly what the
 * whole-text split returns.
 * @module
 */

const START = "<think>";
const END = "</think>";

/** Reasoning parsers the server knows, by vLLM's `--reasoning-parser` name. */
export const REASONING_PARSERS = ["qwen3"] as const;

/** A known reasoning parser name. */
export type ReasoningParserName = (typeof REASONING_PARSERS)[number];

/** A reply's text split in two; null where a side is empty, as vLLM reports it. */
export interface ReasoningSplit {
  reasoning: string | null;
  content: string | null;
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
export function partialTagOverlap(text: string, tag: string): number {
  for (let n = Math.min(text.length, tag.length - 1); n > 0; n--) {
    if (text.endsWith(tag.slice(0, n))) return n;
  }
  return 0;
}

/**
 * The split of `text` as far as it is settled: with `final` false, a trailing partial tag (or an
 * output that may still become a leading `<think>`) is left out of both sides.
 */
function settledSplit(text: string, thinkingEnabled: boolean, final: boolean): { reasoning: string; content: string } {
  // With thinking off the prompt already closed the reasoning: everything is content (vLLM's
  // serving layer streams it so once the prompt ends the reasoning).
  if (!thinkingEnabled) return { reasoning: "", content: text };
  if (!final && text.length < START.length && START.startsWith(text)) return { reasoning: "", content: "" };
  const body = text.startsWith(START) ? text.slice(START.length) : text;
  const end = body.indexOf(END);
  if (end >= 0) return { reasoning: body.slice(0, end), content: body.slice(end + END.length) };
  const held = final ? 0 : partialTagOverlap(body, END);
  return { reasoning: body.slice(0, body.length - held), content: "" };
}

/** Splits a whole reply (non-streaming). */
export function splitReasoning(text: string, thinkingEnabled: boolean): ReasoningSplit {
  const s = settledSplit(text, thinkingEnabled, true);
  return { reasoning: s.reasoning === "" ? null : s.reasoning, content: s.content === "" ? null : s.content };
}

/** What one streamed delta adds to each side ("" when nothing). */
export interface ReasoningDelta {
  reasoning: string;
  content: string;
}

/** Splits a reply as it streams; the deltas it returns add up to splitReasoning of the whole. */
export class StreamingReasoningSplitter {
  #text = "";
  #sentReasoning = 0;
  #sentContent = 0;

  constructor(readonly thinkingEnabled: boolean) {}

  /** Takes the next piece of the reply; `final` on the last one releases anything held back. */
  push(piece: string, final = false): ReasoningDelta {
    this.#text += piece;
    const s = settledSplit(this.#text, this.thinkingEnabled, final);
    const out = {
      reasoning: s.reasoning.slice(this.#sentReasoning),
      content: s.content.slice(this.#sentContent),
    };
    this.#sentReasoning = Math.max(this.#sentReasoning, s.reasoning.length);
    this.#sentContent = Math.max(this.#sentContent, s.content.length);
    return out;
  }
}

/** Whether the request leaves thinking on: vLLM's Qwen3 parser reads `enable_thinking`, default true. */
export function thinkingEnabledOf(chatTemplateKwargs: Record<string, unknown> | null | undefined): boolean {
  return chatTemplateKwargs?.enable_thinking !== false;
}
