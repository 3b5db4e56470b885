// The Mooncake replay: its prefix reuse equals what the trace's hash ids promise, its window and caps
// keep and skip what they say (and count the skips), and a hash id always stands for the same tokens.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { QUICK_MOONCAKE, runE2E } from "../../../bench/e2e.ts";
import { profileTrace } from "../../../bench/trace_profile.ts";
import { workloadDataPath } from "../../../bench/workloads/data_files.ts";
import { JsonlFormatError, parseJsonlWorkload } from "../../../bench/workloads/jsonl.ts";
import { hashIdTokens, MOONCAKE_TRACE_FILE, mooncakeWorkload } from "../../../bench/workloads/mooncake.ts";
import {
  hashIdTokenShare,
  MOONCAKE_BLOCK_TOKENS,
  parseMooncakeTrace,
  selectWindow,
} from "../../../bench/workloads/mooncake_trace.ts";
import { buildWorkload } from "../../../bench/workloads/registry.ts";

const TRACE = workloadDataPath(MOONCAKE_TRACE_FILE);
const records = parseMooncakeTrace(readFileSync(TRACE, "utf8"), TRACE);

/** A temporary trace file of `lines` (objects in the Mooncake format). */
function traceFile(lines: readonly Record<string, unknown>[]): string {
  const path = join(mkdtempSync(join(tmpdir(), "lmpool-mooncake-")), "trace.jsonl");
  writeFileSync(path, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  return path;
}

/** A Mooncake line with `input` tokens whose hash ids are `ids` (one per 512 tokens). */
function line(timestamp: number, input: number, output: number, ids: number[]): Record<string, unknown> {
  return { timestamp, input_length: input, output_length: output, hash_ids: ids };
}

describe("the shipped trace", () => {
  test("is the Mooncake conversation trace: 12,031 requests over an hour, 574 beyond a 40,960-token context", () => {
    expect(records.length).toBe(12031);
    expect(records[records.length - 1]!.timestampMs).toBeLessThan(3600_000);
    const all = selectWindow(records, { maxModelLen: 40960 });
    expect(all.scanned).toBe(12031);
    expect(all.skippedOverContext).toBe(574);
    expect(all.records.length).toBe(12031 - 574);
  });
});

describe("replay shape", () => {
  // The token ids the replay sends must offer exactly the reuse the hash ids describe: computed once
  // from the generated prompts' prefix blocks (the engine's block hashing) and once from hash ids alone.
  const windows = [
    { name: "the validation window", options: { first: 800, maxInput: 8192, maxOutput: 128 } },
    { name: "a time window with long prompts", options: { start: 1200, duration: 90, maxModelLen: 40960 } },
    { name: "the quick window", options: { first: 20, maxInput: 2048, maxOutput: 8 } },
  ];
  for (const { name, options } of windows) {
    for (const blockSize of [16, 256, 512]) {
      test(`${name}, ${blockSize}-token blocks: token reuse equals the hash ids' within 0.1 pp`, () => {
        const w = mooncakeWorkload({ ...options, blockSize });
        const fromTokens = profileTrace(w.requests, blockSize).tokenShare;
        const picked = selectWindow(records, {
          ...("first" in options ? { first: options.first, maxInput: options.maxInput } : {}),
          ...("start" in options ? { startS: options.start, durationS: options.duration } : {}),
          ...("maxOutput" in options ? { maxOutput: options.maxOutput } : {}),
          ...("maxModelLen" in options ? { maxModelLen: options.maxModelLen } : {}),
        });
        expect(picked.records.map((r) => `mooncake-${String(r.index).padStart(4, "0")}`)).toEqual(
          w.requests.map((r) => r.id),
        );
        const fromIds = hashIdTokenShare(picked.records, blockSize);
        expect(fromIds).toBeGreaterThan(0.05);
        expect(Math.abs(fromTokens - fromIds)).toBeLessThan(0.001);
      });
    }
  }

  test("prompts have the trace's input lengths and capped output lengths", () => {
    const w = mooncakeWorkload({ first: 50, maxOutput: 64 });
    const picked = selectWindow(records, { first: 50 });
    w.requests.forEach((r, i) => {
      const rec = picked.records[i]!;
      expect(r.promptTokenIds!.length).toBe(rec.inputLength);
      expect(r.maxTokens).toBe(Math.min(rec.outputLength, 64));
      expect(r.ignoreEos).toBe(true);
    });
  });
});

describe("same id, same tokens", () => {
  test("a hash id's 512 tokens are a pure function of the id (and seed), inside the token range", () => {
    const a = hashIdTokens(7, 10000);
    expect(a.length).toBe(MOONCAKE_BLOCK_TOKENS);
    expect(hashIdTokens(7, 10000)).toEqual(a);
    expect(hashIdTokens(8, 10000)).not.toEqual(a);
    expect(a.every((t) => Number.isInteger(t) && t >= 0 && t <= 10000)).toBe(true);
    expect(hashIdTokens(7, 10000, 1)).not.toEqual(a);
    expect(hashIdTokens(7, 10000, 1)).toEqual(hashIdTokens(7, 10000, 1));
    expect(hashIdTokens(7, 99).every((t) => t <= 99)).toBe(true);
  });

  test("requests share token prefixes exactly where they share hash ids; the last block is cut", () => {
    const path = traceFile([
      line(0, 1100, 5, [0, 1, 2]),
      line(10, 1030, 5, [0, 1, 3]),
      line(20, 700, 5, [0, 4]),
      line(30, 300, 5, [0]),
    ]);
    const [a, b, c, d] = mooncakeWorkload({ path }).requests.map((r) => r.promptTokenIds!);
    expect([a!.length, b!.length, c!.length, d!.length]).toEqual([1100, 1030, 700, 300]);
    expect(b!.slice(0, 1024)).toEqual(a!.slice(0, 1024));
    expect(b!.slice(1024)).not.toEqual(a!.slice(1024, 1030));
    expect(c!.slice(0, 512)).toEqual(a!.slice(0, 512));
    expect(c!.slice(512)).not.toEqual(a!.slice(512, 700));
    expect(d).toEqual(a!.slice(0, 300));
    expect(a!.slice(512, 1024)).toEqual(hashIdTokens(1, 10000));
  });
});

describe("window, skips and caps", () => {
  // input 600 (2 ids), 5000 (10 ids), 900, 3000, 400, 700 at 0..5 s; output 100 each, 4000 for the one at 4 s.
  const lines = [600, 5000, 900, 3000, 400, 700].map((input, i) =>
    line(i * 1000, input, i === 4 ? 4000 : 100, Array.from({ length: Math.ceil(input / 512) }, (_, k) => i * 100 + k))
  );
  const path = traceFile(lines);
  const ids = (o: Record<string, unknown>) => mooncakeWorkload({ path, ...o }).requests.map((r) => r.id);

  test("--first keeps the first N after skips; the skips before the N-th are counted", () => {
    const w = mooncakeWorkload({ path, first: 3, maxInput: 2000 });
    expect(w.requests.map((r) => r.id)).toEqual(["mooncake-0000", "mooncake-0002", "mooncake-0004"]);
    expect(w.params).toMatchObject({ scanned: 5, skippedOverMaxInput: 2, skippedOverContext: 0 });
    expect(w.description).toContain("2 skipped over maxInput, 0 over the context");
  });

  test("--start/--duration select by trace seconds, the end excluded", () => {
    expect(ids({ start: 2, duration: 2 })).toEqual(["mooncake-0002", "mooncake-0003"]);
    expect(ids({ start: 4 })).toEqual(["mooncake-0004", "mooncake-0005"]);
    expect(ids({ duration: 1.5 })).toEqual(["mooncake-0000", "mooncake-0001"]);
    expect(ids({ start: 1, first: 2 })).toEqual(["mooncake-0001", "mooncake-0002"]);
  });

  test("the model's context always skips: input plus capped output must fit", () => {
    const w = mooncakeWorkload({ path, maxModelLen: 4096 });
    expect(w.requests.map((r) => r.id)).toEqual(["mooncake-0000", "mooncake-0002", "mooncake-0003", "mooncake-0005"]);
    expect(w.params).toMatchObject({ scanned: 6, skippedOverMaxInput: 0, skippedOverContext: 2 });
    // Capped at 64 output tokens, the 400-token request fits; a request over both limits counts under maxInput.
    const capped = mooncakeWorkload({ path, maxModelLen: 4096, maxOutput: 64, maxInput: 4096 });
    expect(capped.requests.map((r) => r.maxTokens)).toEqual([64, 64, 64, 64, 64]);
    expect(capped.params).toMatchObject({ skippedOverMaxInput: 1, skippedOverContext: 0 });
  });

  test("arrivals are trace seconds from the first kept request, divided by the speedup", () => {
    const w = mooncakeWorkload({ path, start: 2, speedup: 4 });
    expect(w.requests.map((r) => r.arrivalTime)).toEqual([0, 0.25, 0.5, 0.75]);
    expect(mooncakeWorkload({ path }).requests.map((r) => r.arrivalTime)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  test("bad options, an empty window and unknown options are refused by name", () => {
    expect(() => mooncakeWorkload({ path, first: 0 })).toThrow("first must be a positive integer, got 0");
    expect(() => mooncakeWorkload({ path, start: -1 })).toThrow("start must be a number >= 0, got -1");
    expect(() => mooncakeWorkload({ path, speedup: 0 })).toThrow("speedup must be a number > 0, got 0");
    expect(() => mooncakeWorkload({ path, maxTokenId: 20000, vocabSize: 16000 })).toThrow(
      "maxTokenId (20000) must be below the model's vocabulary size (16000)",
    );
    expect(() => mooncakeWorkload({ path, start: 60 })).toThrow(/keeps no request \(0 in range/);
    expect(() => mooncakeWorkload({ path, numRequests: 3 } as never)).toThrow(
      "unknown mooncake workload option numRequests",
    );
  });

  test("the registry builds it, from the shipped trace or a file in its format", () => {
    expect(buildWorkload({ name: "mooncake", overrides: { first: 3 } }).requests.length).toBe(3);
    expect(buildWorkload({ name: "mooncake", path }).name).toBe("mooncake-trace");
  });
});

describe("trace format errors name the file and line", () => {
  const bad = (l: Record<string, unknown>, problem: string | RegExp) => {
    const text = [JSON.stringify(line(0, 10, 1, [0])), JSON.stringify(l)].join("\n");
    expect(() => parseMooncakeTrace(text, "t.jsonl")).toThrow(JsonlFormatError);
    expect(() => parseMooncakeTrace(text, "t.jsonl")).toThrow(problem);
  };
  test("each field is checked", () => {
    bad({ ...line(1, 10, 1, [0]), extra: 1 }, 't.jsonl:2: unknown field "extra"');
    bad(
      line(1, 1000, 1, [0]),
      't.jsonl:2: "hash_ids" must have one id per 512 tokens of "input_length" 1000 (2), got 1',
    );
    bad(line(1, 0, 1, []), '"input_length" must be an integer >= 1, got 0');
    bad(line(1, 10, 0, [0]), '"output_length" must be an integer >= 1, got 0');
    bad(line(1, 10, 1, [-1]), '"hash_ids"[0] must be an integer >= 0, got -1');
    bad({ ...line(1, 10, 1, [0]), timestamp: "x" }, '"timestamp" must be a number of ms >= 0, got "x"');
    expect(() =>
      parseMooncakeTrace([line(5, 10, 1, [0]), line(4, 10, 1, [1])].map((l) => JSON.stringify(l)).join("\n"), "t")
    ).toThrow('t:2: "timestamp" 4 is earlier than the previous request\'s 5');
  });
  test("the jsonl reader points a Mooncake line to the mooncake workload", () => {
    expect(() => parseJsonlWorkload(JSON.stringify(line(0, 10, 1, [0])), { source: "m.jsonl" })).toThrow(
      'm.jsonl:1: a Mooncake-format line ("hash_ids", no prompt): replay such a trace with --workload mooncake',
    );
  });
});

describe("e2e options", () => {
  const quiet = () => {};
  test("the mooncake flags are refused by name where no mooncake workload reads them", async () => {
    await expect(runE2E(["--quick", "--first", "5"], quiet)).rejects.toThrow(
      '--first is read by --workload mooncake only, got --workload "locality"',
    );
    await expect(runE2E(["--quick", "--workload", "load-skew", "--max-output", "5"], quiet)).rejects.toThrow(
      '--max-output is read by --workload mooncake only, got --workload "load-skew"',
    );
    await expect(runE2E(["--quick", "--workload", "mooncake", "--speedup", "2"], quiet)).rejects.toThrow(
      '--speedup scales the trace\'s arrival times and needs --arrival trace, got --arrival "burst"',
    );
    await expect(runE2E(["--quick", "--workload", "mooncake", "--workload-options", '{"speedup":2}'], quiet)).rejects
      .toThrow("--speedup scales the trace's arrival times and needs --arrival trace");
    await expect(runE2E(["--quick", "--workload", "mooncake", "--first", "0"], quiet)).rejects.toThrow(
      '--first must be a positive integer, got "0"',
    );
    await expect(runE2E(["--quick", "--workload", "mooncake", "--duration", "0"], quiet)).rejects.toThrow(
      '--duration must be a number > 0, got "0"',
    );
    await expect(
      runE2E(["--quick", "--workload", "mooncake", "--first", "5", "--workload-options", '{"first":3}'], quiet),
    ).rejects.toThrow("--first and --workload-options' first set the same option; give one of them");
    await expect(runE2E(["--quick", "--workload", "jsonl,mooncake", "--workload-file", "x.jsonl"], quiet)).rejects
      .toThrow(
        '--workload-file is read by exactly one of --workload jsonl or mooncake, got --workload "jsonl,mooncake"',
      );
  });

  test("--quick's window is the one the CI run replays", () => {
    expect(QUICK_MOONCAKE).toMatchObject({ first: 20, maxInput: 2048, maxOutput: 8 });
  });
});
