// The reply parsers on text: hermes tool calls (Qwen3's <tool_call>{json}</tool_call>) and the
// qwen3 reasoning split, whole and streamed; the streamed pieces of every split of a reply add up
// to the whole-text result. Also the request-level decisions (which tool_choice values are 400s).
import { describe, expect, test } from "bun:test";
import { ApiError } from "../../../lib/server/errors.ts";
import { splitReasoning, StreamingReasoningSplitter } from "../../../lib/server/reasoning_parser.ts";
import {
  type ParsedReply,
  parseReply,
  replyParserSettingsOf,
  type ReplyParsing,
  replyParsingOf,
  StreamingReplyParser,
} from "../../../lib/server/reply_parsing.ts";
import { pythonJsonDumps, splitToolCalls } from "../../../lib/server/tool_call_parser.ts";

const call = (name: string, args: unknown) => `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;

describe("hermes tool calls, whole", () => {
  test("one call: content before it, arguments as Python's json.dumps writes them", () => {
    const r = splitToolCalls(`Let me look.\n${call("get_weather", { city: "Köln", days: [1, 2] })}`);
    expect(r.content).toBe("Let me look.\n");
    expect(r.toolCalls).toHaveLength(1);
    expect(r.toolCalls[0]!.function).toEqual({ name: "get_weather", arguments: '{"city": "Köln", "days": [1, 2]}' });
    expect(r.toolCalls[0]!.type).toBe("function");
    expect(r.toolCalls[0]!.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
  });

  test("two calls, no content: content is null and each call has its own id", () => {
    const r = splitToolCalls(`${call("a", {})}\n${call("b", { x: 1 })}`);
    expect(r.content).toBeNull();
    expect(r.toolCalls.map((c) => [c.function.name, c.function.arguments])).toEqual([["a", "{}"], ["b", '{"x": 1}']]);
    expect(r.toolCalls[0]!.id).not.toBe(r.toolCalls[1]!.id);
  });

  test("a call without its closing tag at the end of the output still parses", () => {
    const r = splitToolCalls('<tool_call>{"name": "f", "arguments": {"q": "a b"}}');
    expect(r.toolCalls.map((c) => c.function)).toEqual([{ name: "f", arguments: '{"q": "a b"}' }]);
  });

  test("invalid JSON inside the tags, a missing name or arguments: the whole reply is plain content", () => {
    for (
      const text of [
        "before <tool_call>{not json}</tool_call>",
        `${call("ok", {})}<tool_call>{"name": "f", "arguments": {</tool_call>`,
        '<tool_call>{"arguments": {}}</tool_call>',
        '<tool_call>{"name": "f"}</tool_call>',
        "<tool_call>[1, 2]</tool_call>",
      ]
    ) {
      expect(splitToolCalls(text)).toEqual({ content: text, toolCalls: [] });
    }
    expect(splitToolCalls("no calls here")).toEqual({ content: "no calls here", toolCalls: [] });
  });

  test("pythonJsonDumps uses Python's separators and keeps non-ASCII", () => {
    expect(pythonJsonDumps({ a: [1, { b: null }], 'k"': "é" })).toBe('{"a": [1, {"b": null}], "k\\"": "é"}');
    expect(pythonJsonDumps("s")).toBe('"s"');
  });
});

describe("qwen3 reasoning, whole", () => {
  test("</think> splits; a leading <think> is dropped; empty sides are null", () => {
    expect(splitReasoning("<think>\nplan\n</think>\n\nanswer", true)).toEqual({
      reasoning: "\nplan\n",
      content: "\n\nanswer",
    });
    expect(splitReasoning("plan</think>answer", true)).toEqual({ reasoning: "plan", content: "answer" });
    expect(splitReasoning("plan</think>", true)).toEqual({ reasoning: "plan", content: null });
  });

  test("no </think>: cut short inside the reasoning (all reasoning), or thinking off (all content)", () => {
    expect(splitReasoning("<think>still thinking", true)).toEqual({ reasoning: "still thinking", content: null });
    expect(splitReasoning("plain answer", false)).toEqual({ reasoning: null, content: "plain answer" });
  });
});

const withBoth: ReplyParsing = { reasoning: { thinkingEnabled: true, include: true }, toolCalls: { parallel: true } };

/** Streams `text` cut at `cuts` and adds the pieces up as a client would. */
function streamed(text: string, cuts: number[], parsing: ReplyParsing): ParsedReply {
  const parser = new StreamingReplyParser(parsing);
  const bounds = [0, ...cuts, text.length];
  let reasoning = "", content = "";
  const calls: ParsedReply["toolCalls"] = [];
  for (let i = 1; i < bounds.length; i++) {
    const d = parser.push(text.slice(bounds[i - 1], bounds[i]), i === bounds.length - 1);
    reasoning += d.reasoning;
    content += d.content;
    calls.push(...d.toolCalls);
  }
  return { reasoning: reasoning === "" ? null : reasoning, content: content === "" ? null : content, toolCalls: calls };
}

const withoutIds = (r: ParsedReply) => ({ ...r, toolCalls: r.toolCalls.map((c) => c.function) });

describe("streamed replies add up to the whole-text parse", () => {
  const replies = [
    `<think>\nI should call it</think>\n\nSure. ${call("f", { a: "</tool_call> inside" })}\n${call("g", [1])}`,
    `<think>x</think>no calls, a < sign and </think again`,
    `Only <tool_call>{"name": broken}</tool_call> text`,
    `<think>cut short <tool_ca`,
    `<thin`,
    `${call("first", { n: 1 })}`,
  ];
  const parsings: ReplyParsing[] = [
    withBoth,
    { reasoning: null, toolCalls: { parallel: true } },
    { reasoning: { thinkingEnabled: true, include: true }, toolCalls: null },
    { reasoning: { thinkingEnabled: false, include: true }, toolCalls: { parallel: true } },
    { reasoning: { thinkingEnabled: true, include: false }, toolCalls: { parallel: false } },
  ];
  test("at every single cut, at every character, and in one piece", () => {
    for (const parsing of parsings) {
      for (const text of replies) {
        const whole = withoutIds(parseReply(text, parsing));
        const cutSets = [[], Array.from({ length: text.length - 1 }, (_, i) => i + 1)];
        for (let c = 1; c < text.length; c++) cutSets.push([c]);
        for (const cuts of cutSets) {
          const got = withoutIds(streamed(text, cuts, parsing));
          // Without a reasoning parser, an empty reply is "" content, not null.
          if (!parsing.reasoning && whole.content === "") whole.content = null;
          expect({ text, cuts, got }).toEqual({ text, cuts, got: whole });
        }
      }
    }
  });

  test("content before a call streams before the reply ends; the calls come whole at the end", () => {
    const parser = new StreamingReplyParser({ reasoning: null, toolCalls: { parallel: true } });
    expect(parser.push("Hello <tool", false)).toEqual({ reasoning: "", content: "Hello ", toolCalls: [] });
    expect(parser.push('_call>{"name": "f", ', false)).toEqual({ reasoning: "", content: "", toolCalls: [] });
    const last = parser.push('"arguments": {}}</tool_call>', true);
    expect(last.content).toBe("");
    expect(last.toolCalls.map((c) => c.function)).toEqual([{ name: "f", arguments: "{}" }]);
  });

  test("reasoning streams as it comes, holding back only a partial </think>", () => {
    const s = new StreamingReasoningSplitter(true);
    expect(s.push("<think>abc</th")).toEqual({ reasoning: "abc", content: "" });
    expect(s.push("ink>the answer")).toEqual({ reasoning: "", content: "the answer" });
  });

  test("parallel_tool_calls false keeps the first call; include_reasoning false drops the reasoning", () => {
    const text = `<think>r</think>${call("a", {})}${call("b", {})}`;
    const r = parseReply(text, {
      reasoning: { thinkingEnabled: true, include: false },
      toolCalls: { parallel: false },
    });
    expect(r.reasoning).toBeNull();
    expect(r.toolCalls.map((c) => c.function.name)).toEqual(["a"]);
  });
});

describe("which requests parse what", () => {
  const on = replyParserSettingsOf({ reasoningParser: "qwen3", enableAutoToolChoice: true, toolCallParser: "hermes" });
  const tools = [{ type: "function", function: { name: "f" } }];
  const status = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      return e instanceof ApiError ? [e.status, e.param, e.message] : ["not an ApiError", String(e)];
    }
    return "no error";
  };

  test("auto (the default with tools) parses tool calls; none and no tools do not", () => {
    expect(replyParsingOf({ tools }, on).toolCalls).toEqual({ parallel: true });
    expect(replyParsingOf({ tools, tool_choice: "none" }, on).toolCalls).toBeNull();
    expect(replyParsingOf({}, on).toolCalls).toBeNull();
    expect(replyParsingOf({ chat_template_kwargs: { enable_thinking: false } }, on).reasoning).toEqual({
      thinkingEnabled: false,
      include: true,
    });
    expect(replyParsingOf({}, {}).reasoning).toBeNull();
  });

  test("auto without the server flags is vLLM's 400; required and a named function need no flag", () => {
    expect(status(() => replyParsingOf({ tools }, {}))).toEqual([
      400,
      "tool_choice",
      '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    ]);
    expect(replyParsingOf({ tools, tool_choice: "required" }, {})).toEqual({
      reasoning: null,
      toolCalls: null,
      forced: { choice: { kind: "required" }, parallel: true },
    });
    const named = replyParsingOf({ tools, tool_choice: { type: "function", function: { name: "f" } } }, on);
    expect(named.forced).toEqual({ choice: { kind: "named", name: "f" }, parallel: true });
    expect(named.toolCalls).toBeNull();
  });

  test("server flags: unknown names and a lone --enable-auto-tool-choice throw naming the flag", () => {
    expect(() => replyParserSettingsOf({ reasoningParser: "deepseek_r1" })).toThrow(/--reasoning-parser/);
    expect(() => replyParserSettingsOf({ toolCallParser: "llama3_json" })).toThrow(/--tool-call-parser/);
    expect(() => replyParserSettingsOf({ enableAutoToolChoice: true })).toThrow(/--tool-call-parser/);
  });
});
