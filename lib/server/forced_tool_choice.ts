/**
 * tool_choice "required" and a named function, as vLLM does them: the output is held to a JSON
 * schema built from the request's tools (structured outputs), and the reply's text becomes the
 * tool calls. A named function's schema is its `parameters`, and the whole generated JSON is that
 * call's `arguments`; "required" is a JSON array of at least one `{"name", "parameters"}` object,
 * each element matching one tool (an anyOf over the tools, their `$defs` hoisted to the top), and
 * each element becomes one call. Streamed, a named call's arguments go out as tool-call deltas as
 * they are generated (as vLLM streams them); "required" calls go out whole when the reply ends.
 * @module
 */
import { type GrammarSpec, MAX_GRAMMAR_TEXT } from "../core/grammar_spec.ts";
import { badRequest } from "./errors.ts";
import { newToolCallId, type ParsedToolCall, pythonJsonDumps } from "./tool_call_parser.ts";

/** A tool choice that forces calls. */
export type ForcedToolChoice = { kind: "named"; name: string } | { kind: "required" };

/** The part of a tool definition the schema is built from. */
export interface ForcedToolDefinition {
  function: { name: string; parameters?: Record<string, unknown> | null };
}

/** The forced choice of an effective tool_choice, or null ("auto", "none"). */
export function forcedToolChoiceOf(choice: unknown): ForcedToolChoice | null {
  if (choice === "required") return { kind: "required" };
  if (typeof choice === "object" && choice !== null) {
    const name = (choice as { function?: { name?: unknown } }).function?.name;
    if (typeof name === "string") return { kind: "named", name };
  }
  return null;
}

// vLLM generates `{}` for a function without parameters, so its schema is then an empty object
// (vLLM does this for "required"; LMPool does it for a named function too, where vLLM leaves the
// output unconstrained).
const EMPTY_PARAMETERS = { type: "object", properties: {} };

function parametersOf(tool: ForcedToolDefinition): Record<string, unknown> {
  const p = tool.function.parameters;
  return p && Object.keys(p).length > 0 ? p : EMPTY_PARAMETERS;
}

/**
 * The JSON schema the output is held to. Throws a 400 naming `tool_choice` for a named function
 * that is not among the tools, and naming `tools` when two tools define one `$defs` name differently.
 */
export function forcedToolSchema(
  forced: ForcedToolChoice,
  tools: readonly ForcedToolDefinition[],
): Record<string, unknown> {
  if (forced.kind === "named") {
    const tool = tools.find((t) => t.function.name === forced.name);
    if (!tool) throw badRequest(`Tool '${forced.name}' has not been passed in \`tools\`.`, "tool_choice");
    return parametersOf(tool);
  }
  // $defs move to the schema's top level, where the tools' "#/$defs/..." references point to.
  const defs: Record<string, unknown> = {};
  const anyOf = tools.map((tool) => {
    const { $defs, ...parameters } = parametersOf(tool);
    for (const [name, def] of Object.entries(($defs ?? {}) as Record<string, unknown>)) {
      if (name in defs && JSON.stringify(defs[name]) !== JSON.stringify(def)) {
        throw badRequest(`Tool definition '${name}' has multiple schemas, which is not supported.`, "tools");
      }
      defs[name] = def;
    }
    return {
      properties: { name: { type: "string", enum: [tool.function.name] }, parameters },
      required: ["name", "parameters"],
    };
  });
  const schema: Record<string, unknown> = { type: "array", minItems: 1, items: { type: "object", anyOf } };
  if (Object.keys(defs).length > 0) schema.$defs = defs;
  return schema;
}

/** The structured-output constraint of a forced choice. */
export function forcedToolSpec(forced: ForcedToolChoice, tools: readonly ForcedToolDefinition[]): GrammarSpec {
  const text = JSON.stringify(forcedToolSchema(forced, tools));
  if (text.length > MAX_GRAMMAR_TEXT) {
    throw badRequest(`the tools' schema holds ${text.length} characters, at most ${MAX_GRAMMAR_TEXT}`, "tools");
  }
  return { kind: "json_schema", text };
}

/**
 * The calls in a whole reply, or null when there are none: a named function's call carries the
 * (non-empty) text as its arguments, as generated (cut short too, as in vLLM); "required" needs the whole
 * array to parse (vLLM fails the request when it does not, e.g. at the length limit; LMPool
 * returns the text as content).
 */
export function forcedToolCalls(text: string, forced: ForcedToolChoice): ParsedToolCall[] | null {
  if (forced.kind === "named") {
    if (text === "") return null;
    return [{ id: newToolCallId(), type: "function", function: { name: forced.name, arguments: text } }];
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (!Array.isArray(value) || value.length === 0) return null;
  const calls: ParsedToolCall[] = [];
  for (const item of value) {
    if (item === null || typeof item !== "object" || typeof item.name !== "string") return null;
    // vLLM re-serializes the parameters with json.dumps(..., ensure_ascii=False).
    calls.push({
      id: newToolCallId(),
      type: "function",
      function: { name: item.name, arguments: pythonJsonDumps(item.parameters ?? {}) },
    });
  }
  return calls;
}

/** A streamed tool-call delta in OpenAI's shape: the first of a call names it. */
export interface ToolCallStreamDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

/** What one streamed piece releases. */
export interface ForcedToolDelta {
  /** Text that turned out not to be calls ("required" whose array does not parse), at the end. */
  content: string;
  /** Whole calls ("required", at the end). */
  toolCalls: ParsedToolCall[];
  /** Argument pieces (a named function, as they come). */
  deltas: ToolCallStreamDelta[];
}

/** Turns a forced reply into tool calls as it streams. */
export class StreamingForcedToolCalls {
  #text = "";
  #started = false;

  constructor(readonly forced: ForcedToolChoice) {}

  /** Takes the next piece; `final` on the last one. */
  push(piece: string, final: boolean): ForcedToolDelta {
    const forced = this.forced;
    if (forced.kind === "named") {
      // The first piece carries the call's id and name; an empty reply has no call, as unstreamed.
      if (piece === "") return { content: "", toolCalls: [], deltas: [] };
      const delta: ToolCallStreamDelta = this.#started
        ? { index: 0, function: { arguments: piece } }
        : { index: 0, id: newToolCallId(), type: "function", function: { name: forced.name, arguments: piece } };
      this.#started = true;
      return { content: "", toolCalls: [], deltas: [delta] };
    }
    this.#text += piece;
    if (!final) return { content: "", toolCalls: [], deltas: [] };
    const calls = forcedToolCalls(this.#text, forced);
    return calls ? { content: "", toolCalls: calls, deltas: [] } : { content: this.#text, toolCalls: [], deltas: [] };
  }
}
