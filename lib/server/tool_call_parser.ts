/**
 * The hermes tool-call parser (vLLM's `--tool-call-parser hermes`, Hermes2ProToolParser), which
 * Qwen3's chat template asks for: a call is `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
 * (the closing tag may be missing at the end of the output). Every call in a reply must parse, or
 * the whole reply is plain content; with calls, the content is the text before the first one.
 *
 * Streaming: content before the first `<tool_call>` streams as it comes (a suffix that may start
 * the tag waits); from the tag on, the text is held and the calls are sent whole when the reply
 * ends, so a malformed call streams as content exactly as the non-streamed reply shows it.
 * @module
 */
import { partialTagOverlap } from "./reasoning_parser.ts";

const START = "<tool_call>";
const END = "</tool_call>";

/** Tool-call parsers the server knows, by vLLM's `--tool-call-parser` name. */
export const TOOL_CALL_PARSERS = ["hermes"] as const;

/** A known tool-call parser name. */
export type ToolCallParserName = (typeof TOOL_CALL_PARSERS)[number];

/** One parsed call, in OpenAI's response shape. */
export interface ParsedToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A reply with its calls taken out; `content` null when empty, as vLLM reports it. */
export interface ToolCallSplit {
  content: string | null;
  toolCalls: ParsedToolCall[];
}

/** A fresh call id in vLLM's form. */
export function newToolCallId(): string {
  return `chatcmpl-tool-${crypto.randomUUID().replace(/-/g, "")}`;
}

/**
 * JSON as Python's json.dumps(value, ensure_ascii=False) writes it (", " and ": " separators):
 * vLLM re-serializes the arguments that way.
 */
export function pythonJsonDumps(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pythonJsonDumps(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** The JSON bodies between the tags, as vLLM's regex finds them (the last may lack its end tag). */
function callBodies(text: string): string[] {
  const bodies: string[] = [];
  let at = text.indexOf(START);
  while (at >= 0) {
    const from = at + START.length;
    const end = text.indexOf(END, from);
    if (end < 0) {
      bodies.push(text.slice(from));
      break;
    }
    bodies.push(text.slice(from, end));
    at = text.indexOf(START, end + END.length);
  }
  return bodies;
}

/** One call from its JSON body, or null when it is not `{"name": string, "arguments": any}`. */
function parseCall(body: string): ParsedToolCall | null {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return null;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  const call = value as Record<string, unknown>;
  if (typeof call.name !== "string" || !("arguments" in call)) return null;
  return {
    id: newToolCallId(),
    type: "function",
    function: { name: call.name, arguments: pythonJsonDumps(call.arguments) },
  };
}

/** Parses a whole reply (non-streaming). */
export function splitToolCalls(text: string): ToolCallSplit {
  const start = text.indexOf(START);
  if (start < 0) return { content: text, toolCalls: [] };
  const toolCalls: ParsedToolCall[] = [];
  for (const body of callBodies(text)) {
    const call = parseCall(body);
    if (!call) return { content: text, toolCalls: [] };
    toolCalls.push(call);
  }
  return { content: start === 0 ? null : text.slice(0, start), toolCalls };
}

/** What one streamed piece releases: content now, and at the end the calls. */
export interface ToolCallDelta {
  content: string;
  toolCalls: ParsedToolCall[];
}

/** Parses a reply as it streams; what it releases adds up to splitToolCalls of the whole. */
export class StreamingToolCallParser {
  #text = "";
  #sent = 0;

  /** Takes the next piece; `final` on the last one releases the calls (or the held text). */
  push(piece: string, final = false): ToolCallDelta {
    this.#text += piece;
    if (final) {
      const whole = splitToolCalls(this.#text);
      const end = whole.toolCalls.length > 0 ? this.#text.indexOf(START) : this.#text.length;
      const rest = this.#text.slice(this.#sent, Math.max(this.#sent, end));
      this.#sent = this.#text.length;
      return { content: rest, toolCalls: whole.toolCalls };
    }
    const start = this.#text.indexOf(START);
    const sendable = start >= 0 ? start : this.#text.length - partialTagOverlap(this.#text, START);
    const content = sendable > this.#sent ? this.#text.slice(this.#sent, sendable) : "";
    this.#sent = Math.max(this.#sent, sendable);
    return { content, toolCalls: [] };
  }
}
