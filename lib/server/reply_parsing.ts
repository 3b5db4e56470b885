/**
 * How a chat reply's text becomes its message: the server's parsers (`--reasoning-parser`,
 * `--enable-auto-tool-choice` with `--tool-call-parser`, vLLM's flags) and the request's tool
 * choice decide whether reasoning is split off and tool calls are taken out, whole (parseReply)
 * or as the reply streams (StreamingReplyParser), which add up to the same message. A forced
 * tool choice ("required", a named function) needs no parser flag: its reply is JSON held to the
 * tools' schema (forced_tool_choice.ts).
 * @module
 */
import { badRequest } from "./errors.ts";
import {
  forcedToolCalls,
  type ForcedToolChoice,
  forcedToolChoiceOf,
  StreamingForcedToolCalls,
  type ToolCallStreamDelta,
} from "./forced_tool_choice.ts";
import {
  REASONING_PARSERS,
  type ReasoningParserName,
  splitReasoning,
  StreamingReasoningSplitter,
  thinkingEnabledOf,
} from "./reasoning_parser.ts";
import {
  type ParsedToolCall,
  splitToolCalls,
  StreamingToolCallParser,
  TOOL_CALL_PARSERS,
  type ToolCallParserName,
} from "./tool_call_parser.ts";

/** The server's parser settings (vLLM's serve flags of the same names). */
export interface ReplyParserSettings {
  /** `--reasoning-parser`: split `<think>` reasoning from the content. */
  reasoningParser?: ReasoningParserName;
  /** `--enable-auto-tool-choice`: parse tool calls when a request has tools and tool_choice "auto". */
  enableAutoToolChoice?: boolean;
  /** `--tool-call-parser`: the tool-call format. */
  toolCallParser?: ToolCallParserName;
}

function oneOf<T extends string>(flag: string, known: readonly T[], v: string | undefined): T | undefined {
  if (v === undefined) return undefined;
  if (!(known as readonly string[]).includes(v)) {
    throw new RangeError(`--${flag} must be one of ${known.join(", ")}, got ${JSON.stringify(v)}`);
  }
  return v as T;
}

/** Checks the parser flags as `vllm serve` does; an unknown name or a lone --enable-auto-tool-choice throws. */
export function replyParserSettingsOf(flags: {
  reasoningParser?: string;
  enableAutoToolChoice?: boolean;
  toolCallParser?: string;
}): ReplyParserSettings {
  const reasoningParser = oneOf("reasoning-parser", REASONING_PARSERS, flags.reasoningParser);
  const toolCallParser = oneOf("tool-call-parser", TOOL_CALL_PARSERS, flags.toolCallParser);
  if (flags.enableAutoToolChoice && toolCallParser === undefined) {
    throw new RangeError(
      "--enable-auto-tool-choice needs --tool-call-parser (one of " + TOOL_CALL_PARSERS.join(", ") + ")",
    );
  }
  return { reasoningParser, enableAutoToolChoice: flags.enableAutoToolChoice ?? false, toolCallParser };
}

/** How one request's replies are parsed. */
export interface ReplyParsing {
  /** Split reasoning off (null: no reasoning parser). */
  reasoning: { thinkingEnabled: boolean; include: boolean } | null;
  /** Take tool calls out (null: tools are not parsed for this request). */
  toolCalls: { parallel: boolean } | null;
  /** tool_choice "required" or a named function: the whole content is the calls. */
  forced?: { choice: ForcedToolChoice; parallel: boolean } | null;
}

/** The chat request fields that decide the parsing. */
export interface ReplyParsingFields {
  tools?: readonly unknown[] | null;
  tool_choice?: unknown;
  parallel_tool_calls?: boolean | null;
  include_reasoning?: boolean | null;
  chat_template_kwargs?: Record<string, unknown> | null;
}

/** The request's effective tool_choice: as sent, else "auto" with tools and "none" without (vLLM's default). */
export function toolChoiceOf(body: ReplyParsingFields): unknown {
  return body.tool_choice ?? (body.tools ? "auto" : "none");
}

/**
 * The parsing of one request. "required" and a named function need no server flag (the schema,
 * not a parser, makes the calls; vLLM's newest releases ask for a tool parser here).
 */
export function replyParsingOf(body: ReplyParsingFields, settings: ReplyParserSettings): ReplyParsing {
  const choice = toolChoiceOf(body);
  const reasoning = settings.reasoningParser
    ? { thinkingEnabled: thinkingEnabledOf(body.chat_template_kwargs), include: body.include_reasoning ?? true }
    : null;
  const forced = body.tools ? forcedToolChoiceOf(choice) : null;
  if (forced) {
    return { reasoning, toolCalls: null, forced: { choice: forced, parallel: body.parallel_tool_calls ?? true } };
  }
  let toolCalls: ReplyParsing["toolCalls"] = null;
  if (choice === "auto" && body.tools) {
    if (!settings.enableAutoToolChoice || !settings.toolCallParser) {
      throw badRequest(
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        "tool_choice",
      );
    }
    toolCalls = { parallel: body.parallel_tool_calls ?? true };
  }
  return { reasoning, toolCalls };
}

/** A reply as its message reports it. */
export interface ParsedReply {
  /** null when there is none (or the request left it out with include_reasoning: false). */
  reasoning: string | null;
  /** null when a parser found none; the raw text when no parser ran. */
  content: string | null;
  toolCalls: ParsedToolCall[];
}

function keptCalls(calls: ParsedToolCall[], parsing: ReplyParsing): ParsedToolCall[] {
  // parallel_tool_calls: false keeps the first call only, as vLLM filters them.
  return (parsing.toolCalls ?? parsing.forced)?.parallel === false ? calls.slice(0, 1) : calls;
}

/** Parses a whole reply. */
export function parseReply(text: string, parsing: ReplyParsing): ParsedReply {
  let reasoning: string | null = null;
  let content: string | null = text;
  if (parsing.reasoning) {
    const split = splitReasoning(text, parsing.reasoning.thinkingEnabled);
    reasoning = parsing.reasoning.include ? split.reasoning : null;
    content = split.content;
  }
  if (parsing.forced && content !== null) {
    // As vLLM reports a forced call: the content is "" (not null) beside the calls.
    const calls = forcedToolCalls(content, parsing.forced.choice);
    return calls
      ? { reasoning, content: "", toolCalls: keptCalls(calls, parsing) }
      : { reasoning, content, toolCalls: [] };
  }
  if (!parsing.toolCalls || content === null) return { reasoning, content, toolCalls: [] };
  const tools = splitToolCalls(content);
  return { reasoning, content: tools.content, toolCalls: keptCalls(tools.toolCalls, parsing) };
}

/** What one streamed piece of a reply releases. */
export interface ReplyDelta {
  reasoning: string;
  content: string;
  toolCalls: ParsedToolCall[];
  /** A named function's call as it streams (its first delta names it); only with a forced choice. */
  toolCallDeltas?: ToolCallStreamDelta[];
}

/** Parses a reply as it streams; its deltas add up to parseReply of the whole text. */
export class StreamingReplyParser {
  readonly #reasoning: StreamingReasoningSplitter | null;
  readonly #tools: StreamingToolCallParser | null;
  readonly #forced: StreamingForcedToolCalls | null;

  constructor(readonly parsing: ReplyParsing) {
    this.#reasoning = parsing.reasoning ? new StreamingReasoningSplitter(parsing.reasoning.thinkingEnabled) : null;
    this.#tools = parsing.toolCalls ? new StreamingToolCallParser() : null;
    this.#forced = parsing.forced ? new StreamingForcedToolCalls(parsing.forced.choice) : null;
  }

  /** Takes the next piece of text; `final` on the reply's last piece releases whatever is held. */
  push(piece: string, final: boolean): ReplyDelta {
    let reasoning = "";
    let content = piece;
    if (this.#reasoning) {
      const d = this.#reasoning.push(piece, final);
      reasoning = this.parsing.reasoning!.include ? d.reasoning : "";
      content = d.content;
    }
    if (this.#forced) {
      const f = this.#forced.push(content, final);
      return {
        reasoning,
        content: f.content,
        toolCalls: keptCalls(f.toolCalls, this.parsing),
        toolCallDeltas: f.deltas,
      };
    }
    if (!this.#tools) return { reasoning, content, toolCalls: [] };
    const t = this.#tools.push(content, final);
    return { reasoning, content: t.content, toolCalls: keptCalls(t.toolCalls, this.parsing) };
  }
}
