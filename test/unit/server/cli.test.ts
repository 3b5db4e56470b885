// serve's command line: defaults, every flag, and bad values that name the flag.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { parseServeArgs, SERVE_USAGE } from "../../../lib/server/cli.ts";
import { StartupError, startupErrorLine, withFlagNames } from "../../../lib/server/startup_errors.ts";
import { LMPOOL_VERSION } from "../../../lib/server/version.ts";

describe("parseServeArgs", () => {
  test("defaults", () => {
    const o = parseServeArgs([]);
    expect(o).toMatchObject({
      host: "127.0.0.1",
      port: 8000,
      gpus: 1,
      help: false,
      maxRequestBytes: 4194304,
      drainTimeout: 30,
      tokenizerThreads: 2,
    });
    expect(o.model).toBeUndefined();
    expect(o.requestTimeout).toBeUndefined();
    expect(o.kvTransfers).toBeUndefined();
  });

  test("every flag", () => {
    const o = parseServeArgs([
      "--model",
      "/m",
      "--gpus",
      "4",
      "--host",
      "0.0.0.0",
      "--port",
      "0",
      "--max-model-len",
      "2048",
      "--block-size",
      "16",
      "--gpu-memory-utilization",
      "0.8",
      "--max-num-seqs",
      "64",
      "--max-num-batched-tokens",
      "4096",
      "--routing-policy",
      "kv-aware",
      "--nvlink-pairs",
      "0-1,2-3",
      "--api-key",
      "k",
      "--served-model-name",
      "qwen",
      "--backend",
      "cpu",
      "--num-gpu-blocks-override",
      "512",
      "--kv-transfers",
      "force",
      "--max-request-bytes",
      "1000",
      "--request-timeout",
      "2.5",
      "--drain-timeout",
      "0",
      "--tokenizer-threads",
      "3",
      "--reasoning-parser",
      "qwen3",
      "--enable-auto-tool-choice",
      "--tool-call-parser",
      "hermes",
    ]);
    expect(o).toEqual({
      model: "/m",
      gpus: 4,
      host: "0.0.0.0",
      port: 0,
      maxModelLen: 2048,
      blockSize: 16,
      gpuMemoryUtilization: 0.8,
      maxNumSeqs: 64,
      maxNumBatchedTokens: 4096,
      routingPolicy: "kv-aware",
      nvlinkPairs: [[0, 1], [2, 3]],
      apiKey: "k",
      servedModelName: "qwen",
      backend: "cpu",
      numGpuBlocksOverride: 512,
      kvTransfers: "force",
      maxRequestBytes: 1000,
      requestTimeout: 2.5,
      drainTimeout: 0,
      tokenizerThreads: 3,
      replyParsers: { reasoningParser: "qwen3", enableAutoToolChoice: true, toolCallParser: "hermes" },
      help: false,
    });
    expect(parseServeArgs(["-h"]).help).toBe(true);
  });

  test("bad values name the flag", () => {
    expect(() => parseServeArgs(["--port", "http"])).toThrow(/--port.*"http"/);
    expect(() => parseServeArgs(["--port", "70000"])).toThrow(/--port/);
    expect(() => parseServeArgs(["--gpus", "0"])).toThrow(/--gpus/);
    expect(() => parseServeArgs(["--gpu-memory-utilization", "1.5"])).toThrow(/--gpu-memory-utilization/);
    expect(() => parseServeArgs(["--backend", "tpu"])).toThrow(/--backend/);
    expect(() => parseServeArgs(["--nvlink-pairs", "0-0"])).toThrow(/--nvlink-pairs/);
    expect(() => parseServeArgs(["--bogus"])).toThrow();
    expect(() => parseServeArgs(["extra"])).toThrow(/unexpected argument/);
    expect(() => parseServeArgs(["--gpus", "0,x"])).toThrow(/--gpus.*"0,x"/);
    expect(() => parseServeArgs(["--gpus=-1,0"])).toThrow(/--gpus/);
    expect(() => parseServeArgs(["--gpus", ","])).toThrow(/--gpus/);
    expect(() => parseServeArgs(["--kv-transfers", "sometimes"])).toThrow(
      /--kv-transfers.*off, auto, force.*"sometimes"/,
    );
    expect(() => parseServeArgs(["--num-gpu-blocks-override", "0"])).toThrow(/--num-gpu-blocks-override/);
    expect(() => parseServeArgs(["--max-request-bytes", "4MB"])).toThrow(/--max-request-bytes.*"4MB"/);
    expect(() => parseServeArgs(["--request-timeout", "0"])).toThrow(/--request-timeout.*"0"/);
    expect(() => parseServeArgs(["--request-timeout", "1e12"])).toThrow(/--request-timeout/);
    expect(() => parseServeArgs(["--drain-timeout=-1"])).toThrow(/--drain-timeout.*"-1"/);
    expect(() => parseServeArgs(["--tokenizer-threads", "0"])).toThrow(/--tokenizer-threads/);
    expect(() => parseServeArgs(["--reasoning-parser", "deepseek_r1"])).toThrow(
      /--reasoning-parser must be one of qwen3, got "deepseek_r1"/,
    );
    expect(() => parseServeArgs(["--tool-call-parser", "mistral"])).toThrow(/--tool-call-parser.*hermes.*"mistral"/);
    expect(() => parseServeArgs(["--enable-auto-tool-choice"])).toThrow(
      /--enable-auto-tool-choice needs --tool-call-parser/,
    );
    expect(parseServeArgs([]).replyParsers).toEqual({ enableAutoToolChoice: false });
  });

  test("--gpus: a count, or device ids with repeats (two ranks on one device)", () => {
    expect(parseServeArgs(["--gpus", "2"]).gpus).toBe(2);
    expect(parseServeArgs(["--gpus", "0,0"]).gpus).toEqual([0, 0]);
    expect(parseServeArgs(["--gpus", "1, 0,1"]).gpus).toEqual([1, 0, 1]);
    expect(parseServeArgs(["--gpus", "3,"]).gpus).toEqual([3]);
  });

  test("the help text lists every flag; the version matches package.json", () => {
    const flags = [
      "--model",
      "--gpus",
      "--host",
      "--port",
      "--max-model-len",
      "--block-size",
      "--gpu-memory-utilization",
      "--max-num-seqs",
      "--max-num-batched-tokens",
      "--routing-policy",
      "--nvlink-pairs",
      "--api-key",
      "--served-model-name",
      "--backend",
      "--help",
      "--num-gpu-blocks-override",
      "--kv-transfers",
      "--max-request-bytes",
      "--request-timeout",
      "--drain-timeout",
      "--tokenizer-threads",
      "--reasoning-parser",
      "--enable-auto-tool-choice",
      "--tool-call-parser",
      "x-request-timeout",
    ];
    for (const flag of flags) {
      expect(SERVE_USAGE).toContain(flag);
    }
    const pkg = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as {
      version: string;
    };
    expect(LMPOOL_VERSION).toBe(pkg.version);
  });
});

describe("start-up error lines", () => {
  test("engine option names become flags; messages become one line", () => {
    expect(withFlagNames("maxModelLen must be an integer in 1..40960, got 100000")).toBe(
      "--max-model-len must be an integer in 1..40960, got 100000",
    );
    expect(withFlagNames("numBlocks must be a positive integer; blockSize too")).toBe(
      "--num-gpu-blocks-override must be a positive integer; --block-size too",
    );
    expect(withFlagNames("unknownThing stays")).toBe("unknownThing stays");
    expect(startupErrorLine(new Error("no library; tried:\n  /a: not found\nRun make"))).toBe(
      "no library; tried:; /a: not found; Run make",
    );
    expect(startupErrorLine(new StartupError("--port", "8000 is in use"))).toBe("--port 8000 is in use");
  });
});
