// The custom JSONL workload reader: fields, defaults, and errors that name the bad line.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { JsonlFormatError, parseJsonlWorkload, readJsonlWorkload } from "../../../bench/workloads/jsonl.ts";

test("reads text and token-id prompts with their optional fields", () => {
  const text = [
    '{"prompt": "hello", "max_tokens": 4, "arrival_time": 0.5, "session_id": "s1", "temperature": 0, "ignore_eos": true}',
    "",
    '{"prompt_token_ids": [1, 2, 3], "max_tokens": 2, "session_id": 7, "extra": "ignored", "id": "r2", "phase": "reuse"}',
  ].join("\n");
  const w = parseJsonlWorkload(text, { name: "t" });
  expect(w.requests).toEqual([
    { id: "t-0000", prompt: "hello", maxTokens: 4, arrivalTime: 0.5, sessionId: "s1", temperature: 0, ignoreEos: true },
    { id: "r2", promptTokenIds: [1, 2, 3], maxTokens: 2, sessionId: "7", phase: "reuse" },
  ]);
  expect(w.seed).toBeNull();
});

test("each error names the source and the 1-based line", () => {
  const bad = (lines: string[], pattern: RegExp, line: number) => {
    let err: unknown;
    try {
      parseJsonlWorkload(lines.join("\n"), { source: "trace.jsonl" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(JsonlFormatError);
    expect((err as JsonlFormatError).line).toBe(line);
    expect((err as Error).message).toStartWith(`trace.jsonl:${line}: `);
    expect((err as Error).message).toMatch(pattern);
  };
  const ok = '{"prompt": "a", "max_tokens": 1}';
  bad([ok, ok, '{"prompt": "a", "max_tokens": 0}'], /"max_tokens" must be an integer >= 1, got 0/, 3);
  bad([ok, "{not json"], /not valid JSON/, 2);
  bad(
    ['{"prompt": "a", "prompt_token_ids": [1], "max_tokens": 1}'],
    /exactly one of "prompt" and "prompt_token_ids".*both/,
    1,
  );
  bad([ok, "", '{"max_tokens": 1}'], /neither/, 3);
  bad(['{"prompt_token_ids": [1, -2], "max_tokens": 1}'], /\[1\] must be a non-negative integer, got -2/, 1);
  bad(['{"prompt": "a", "max_tokens": 1, "arrival_time": -1}'], /arrival_time/, 1);
  bad(['{"prompt": "a", "max_tokens": 1, "ignore_eos": "yes"}'], /ignore_eos/, 1);
  bad(["[1, 2]"], /expected a JSON object/, 1);
});

test("an empty file and duplicate ids are rejected", () => {
  expect(() => parseJsonlWorkload("\n\n", { source: "e.jsonl" })).toThrow(/no requests/);
  expect(() =>
    parseJsonlWorkload('{"id": 1, "prompt": "a", "max_tokens": 1}\n{"id": "1", "prompt": "b", "max_tokens": 1}')
  ).toThrow(/"1" appears more than once/);
});

test("reads a file, naming it in errors and in the workload", () => {
  const dir = mkdtempSync(join(tmpdir(), "lmpool-jsonl-"));
  const path = join(dir, "my_trace.jsonl");
  writeFileSync(path, '{"prompt_token_ids": [5], "max_tokens": 3}\n');
  const w = readJsonlWorkload(path);
  expect(w.name).toBe("my_trace");
  expect(w.requests[0]).toMatchObject({ promptTokenIds: [5], maxTokens: 3 });
  writeFileSync(path, '{"prompt_token_ids": [5], "max_tokens": 3}\n{"max_tokens": 3}\n');
  expect(() => readJsonlWorkload(path)).toThrow(`${path}:2:`);
  expect(() => readJsonlWorkload(join(dir, "missing.jsonl"))).toThrow(/missing\.jsonl/);
});
