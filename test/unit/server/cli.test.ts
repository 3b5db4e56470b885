// serve's command line: defaults, every flag, and bad values that name the flag.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { parseServeArgs, SERVE_USAGE } from "../../../lib/server/cli.ts";
import { LMPOOL_VERSION } from "../../../lib/server/version.ts";

describe("parseServeArgs", () => {
  test("defaults", () => {
    const o = parseServeArgs([]);
    expect(o).toMatchObject({ host: "127.0.0.1", port: 8000, gpus: 1, help: false });
    expect(o.model).toBeUndefined();
  });

  test("every flag", () => {
    const o = parseServeArgs([
      "--model", "/m", "--gpus", "4", "--host", "0.0.0.0", "--port", "0", "--max-model-len", "2048", "--block-size", "16",
      "--gpu-memory-utilization", "0.8", "--max-num-seqs", "64", "--max-num-batched-tokens", "4096", "--routing-policy", "kv-aware",
      "--nvlink-pairs", "0-1,2-3", "--api-key", "k", "--served-model-name", "qwen", "--backend", "cpu",
    ]);
    expect(o).toEqual({
      model: "/m", gpus: 4, host: "0.0.0.0", port: 0, maxModelLen: 2048, blockSize: 16, gpuMemoryUtilization: 0.8, maxNumSeqs: 64,
      maxNumBatchedTokens: 4096, routingPolicy: "kv-aware", nvlinkPairs: [[0, 1], [2, 3]], apiKey: "k", servedModelName: "qwen", backend: "cpu", help: false,
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
  });

  test("the help text lists every flag; the version matches package.json", () => {
    const flags = [
      "--model", "--gpus", "--host", "--port", "--max-model-len", "--block-size", "--gpu-memory-utilization", "--max-num-seqs",
      "--max-num-batched-tokens", "--routing-policy", "--nvlink-pairs", "--api-key", "--served-model-name", "--backend", "--help",
    ];
    for (const flag of flags) {
      expect(SERVE_USAGE).toContain(flag);
    }
    const pkg = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string };
    expect(LMPOOL_VERSION).toBe(pkg.version);
  });
});
