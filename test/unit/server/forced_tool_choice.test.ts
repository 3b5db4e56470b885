// tool_choice "required" and a named function on their own: the JSON schema the output is held to
// (vLLM's construction: a named function's parameters; for "required" an array, minItems 1, of an
// anyOf over {name: enum [tool], parameters} with $defs hoisted), compiled by xgrammar; the text ->
// tool calls step, whole and streamed, through the reply parser; and the 400s (unknown function,
// conflicting $defs).
import { describe, expect, test } from "bun:test";
import { ApiError } from "../../../lib/server/errors.ts";
import {
  forcedToolCalls,
  type ForcedToolDefinition,
  forcedToolSchema,
  forcedToolSpec,
} from "../../../lib/server/forced_tool_choice.ts";
import { parseReply, type ReplyParsing, StreamingReplyParser } from "../../../lib/server/reply_parsing.ts";
import { checkGrammar } from "../../../lib/model/grammar/grammar_checker.ts";

const WEATHER = {
  type: "object",
  properties: { city: { type: "string" }, unit: { $ref: "#/$defs/unit" } },
  required: ["city"],
  $defs: { unit: { enum: ["c", "f"] } },
};
const tools: ForcedToolDefinition[] = [
  { function: { name: "weather", parameters: WEATHER } },
  { function: { name: "now", parameters: null } },
];

const apiError = (f: () => unknown): [number, string | null, string] | string => {
  try {
    f();
  } catch (e) {
    return e instanceof ApiError ? [e.status, e.param, e.message] : String(e);
  }
  return "no error";
};

describe("the schema", () => {
  test("a named function: its parameters as sent; none or {} is an empty object", () => {
    expect(forcedToolSchema({ kind: "named", name: "weather" }, tools)).toBe(WEATHER);
    expect(forcedToolSchema({ kind: "named", name: "now" }, tools)).toEqual({ type: "object", properties: {} });
    expect(forcedToolSchema({ kind: "named", name: "x" }, [{ function: { name: "x", parameters: {} } }]))
      .toEqual({ type: "object", properties: {} });
  });

  test('"required": an array of at least one call to one of the tools, $defs at the top', () => {
    expect(forcedToolSchema({ kind: "required" }, tools)).toEqual({
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        anyOf: [
          {
            properties: {
              name: { type: "string", enum: ["weather"] },
              parameters: { type: "object", properties: WEATHER.properties, required: ["city"] },
            },
            required: ["name", "parameters"],
          },
          {
            properties: { name: { type: "string", enum: ["now"] }, parameters: { type: "object", properties: {} } },
            required: ["name", "parameters"],
          },
        ],
      },
      $defs: { unit: { enum: ["c", "f"] } },
    });
    // The request's tools are left as sent.
    expect(WEATHER.$defs).toEqual({ unit: { enum: ["c", "f"] } });
  });

  test("400s: a function not among the tools (tool_choice), one $defs name defined twice (tools)", () => {
    expect(apiError(() => forcedToolSchema({ kind: "named", name: "nope" }, tools))).toEqual([
      400,
      "tool_choice",
      "Tool 'nope' has not been passed in `tools`.",
    ]);
    const clash = [
      ...tools,
      { function: { name: "other", parameters: { type: "object", $defs: { unit: { enum: ["k"] } } } } },
    ];
    const err = apiError(() => forcedToolSchema({ kind: "required" }, clash)) as unknown[];
    expect(err.slice(0, 2)).toEqual([400, "tools"]);
    expect(err[2]).toContain("'unit' has multiple schemas");
    // The same definition twice is fine.
    const same = [...tools, { function: { name: "other", parameters: { type: "object", $defs: WEATHER.$defs } } }];
    expect(forcedToolSchema({ kind: "required" }, same).$defs as object).toEqual(WEATHER.$defs);
  });

  test("xgrammar compiles both", async () => {
    for (const forced of [{ kind: "named", name: "weather" }, { kind: "required" }] as const) {
      const spec = forcedToolSpec(forced, tools);
      expect(spec.kind).toBe("json_schema");
      await checkGrammar(spec);
    }
  });
});

describe("text -> tool calls", () => {
  test("a named function: the text is the arguments, as generated", () => {
    const calls = forcedToolCalls('{"city": "Köln"}', { kind: "named", name: "weather" })!;
    expect(calls.map((c) => [c.type, c.function])).toEqual([["function", {
      name: "weather",
      arguments: '{"city": "Köln"}',
    }]]);
    expect(calls[0]!.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(forcedToolCalls("", { kind: "named", name: "weather" })).toBeNull();
  });

  test('"required": each element is a call, its parameters re-serialized as vLLM does; else null', () => {
    const calls = forcedToolCalls('[{"name":"weather","parameters":{"city":"Bonn"}},{"name":"now","parameters":{}}]', {
      kind: "required",
    })!;
    expect(calls.map((c) => c.function)).toEqual([
      { name: "weather", arguments: '{"city": "Bonn"}' },
      { name: "now", arguments: "{}" },
    ]);
    expect(forcedToolCalls('[{"name":"weather","parameters":{"ci', { kind: "required" })).toBeNull();
    expect(forcedToolCalls("[]", { kind: "required" })).toBeNull();
  });

  const required: ReplyParsing = {
    reasoning: null,
    toolCalls: null,
    forced: { choice: { kind: "required" }, parallel: true },
  };
  const TEXT = '[{"name": "now", "parameters": {}}, {"name": "weather", "parameters": {"city": "x"}}]';

  test('through the reply parser: content is "" beside the calls; parallel_tool_calls false keeps one', () => {
    const whole = parseReply(TEXT, required);
    expect(whole.content).toBe("");
    expect(whole.toolCalls.map((c) => c.function.name)).toEqual(["now", "weather"]);
    const single = parseReply(TEXT, { ...required, forced: { choice: { kind: "required" }, parallel: false } });
    expect(single.toolCalls.map((c) => c.function.name)).toEqual(["now"]);
    // Cut short: the text stays content.
    expect(parseReply(TEXT.slice(0, 20), required)).toEqual({
      reasoning: null,
      content: TEXT.slice(0, 20),
      toolCalls: [],
    });
  });

  test('streamed: "required" calls come whole at the end; a named call as argument deltas', () => {
    const r = new StreamingReplyParser(required);
    expect(r.push(TEXT.slice(0, 30), false)).toMatchObject({ content: "", toolCalls: [] });
    const last = r.push(TEXT.slice(30), true);
    expect(last.toolCalls.map((c) => c.function)).toEqual(parseReply(TEXT, required).toolCalls.map((c) => c.function));

    const named = new StreamingReplyParser({
      reasoning: null,
      toolCalls: null,
      forced: { choice: { kind: "named", name: "weather" }, parallel: true },
    });
    const pieces = ['{"ci', "", 'ty": "Bo', 'nn"}'];
    const deltas = pieces.flatMap((p, i) => named.push(p, i === pieces.length - 1).toolCallDeltas ?? []);
    expect(deltas).toHaveLength(3);
    expect(deltas[0]).toMatchObject({ index: 0, type: "function", function: { name: "weather", arguments: '{"ci' } });
    expect(deltas[0]!.id).toMatch(/^chatcmpl-tool-/);
    expect(deltas.slice(1)).toEqual([{ index: 0, function: { arguments: 'ty": "Bo' } }, {
      index: 0,
      function: { arguments: 'nn"}' },
    }]);
  });
});
