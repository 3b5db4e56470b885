// Benchmark command-line options: a bad value fails with an error that names the option and the text.
import { describe, expect, test } from "bun:test";
import { describeGpus, gpusOption, intListOption, intOption } from "../../../bench/cli_options.ts";
import { buildConfigurations } from "../../../bench/configurations.ts";

describe("gpusOption", () => {
  test("absent: the fallback count of ranks on devices 0..n-1", () => {
    expect(gpusOption("gpus", undefined, 2)).toEqual([0, 1]);
    expect(gpusOption("gpus", undefined, 1)).toEqual([0]);
  });
  test("a count: ranks on devices 0..n-1", () => {
    expect(gpusOption("gpus", "1", 2)).toEqual([0]);
    expect(gpusOption("gpus", "4", 2)).toEqual([0, 1, 2, 3]);
    expect(gpusOption("gpus", " 3 ", 2)).toEqual([0, 1, 2]);
  });
  test("a list: the device of each rank, repeats allowed", () => {
    expect(gpusOption("gpus", "0,0", 2)).toEqual([0, 0]);
    expect(gpusOption("gpus", "2,3", 2)).toEqual([2, 3]);
    expect(gpusOption("gpus", "1, 1, 0", 2)).toEqual([1, 1, 0]);
  });
  test("a trailing comma makes a one-rank list, which a bare number (a count) cannot say", () => {
    expect(gpusOption("gpus", "3,", 2)).toEqual([3]);
    expect(gpusOption("gpus", "0,", 2)).toEqual([0]);
  });
  test("bad values name the flag and the text", () => {
    for (
      const bad of [
        "0",
        "",
        " ",
        "-1",
        "1.5",
        "two",
        "0x2",
        "1e1",
        "0,,1",
        ",0",
        "0,-1",
        "0,a",
        ",",
        "0,1,,",
        "99999999999999999999",
      ]
    ) {
      expect(() => gpusOption("gpus", bad, 2)).toThrow(
        new RegExp(`^--gpus must be a GPU count .* got ${JSON.stringify(bad).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`),
      );
    }
    expect(() => gpusOption("devices", "x", 2)).toThrow(RangeError);
    expect(() => gpusOption("devices", "x", 2)).toThrow(/^--devices /);
  });
});

test("describeGpus says a plain count as GPUs and any other list by its devices", () => {
  expect(describeGpus([0, 1])).toBe("2 GPUs");
  expect(describeGpus([0])).toBe("1 GPU");
  expect(describeGpus([0, 0])).toBe("2 ranks on devices 0,0");
  expect(describeGpus([3])).toBe("1 rank on device 3");
});

test("intOption and intListOption name the option and the text", () => {
  expect(intOption("repetitions", undefined, 3)).toBe(3);
  expect(intOption("repetitions", "5", 3)).toBe(5);
  expect(() => intOption("repetitions", "0", 3)).toThrow('--repetitions must be a positive integer, got "0"');
  expect(() => intOption("seed", "-1", 0, 0)).toThrow('--seed must be an integer >= 0, got "-1"');
  expect(intListOption("batches", "1,2,4")).toEqual([1, 2, 4]);
  expect(() => intListOption("batches", "1,x")).toThrow(
    '--batches must be a comma-separated list of integers, got "1,x"',
  );
});

test("the e2e configurations describe their ranks and run single-gpu on the first listed device", () => {
  const ctx = { modelDir: "/nonexistent", gpus: [1, 1] };
  const [single, rr] = buildConfigurations(["single-gpu", "round-robin"], ctx);
  expect(single!.description).toBe("one GPU, in-process LLM, local prefix cache only (device 1)");
  expect(rr!.description).toBe("2 ranks on devices 1,1, round-robin dispatch, transfers off");
  const [plain] = buildConfigurations(["lmpool"], { modelDir: "/nonexistent", gpus: [0, 1] });
  expect(plain!.description).toBe("2 GPUs, cost-model routing with foreground and background KV transfer");
});

test("e2e refuses a bad --gpus, and --workload-file or --scales that its workloads would not read", async () => {
  const { runE2E } = await import("../../../bench/e2e.ts");
  const quiet = () => {};
  await expect(runE2E(["--quick", "--gpus", "0,,1"], quiet)).rejects.toThrow(
    /^--gpus must be a GPU count .* got "0,,1"$/,
  );
  await expect(runE2E(["--quick", "--gpus", "0"], quiet)).rejects.toThrow(/--gpus must be .* got "0"/);
  await expect(runE2E(["--quick", "--workload", "load-skew", "--workload-file", "x.jsonl"], quiet)).rejects.toThrow(
    '--workload-file is read by exactly one of --workload jsonl or mooncake, got --workload "load-skew"',
  );
  await expect(runE2E(["--quick", "--workload", "load-skew", "--scales", "3"], quiet)).rejects.toThrow(
    '--scales is read by --workload locality only, got --workload "load-skew"',
  );
  await expect(runE2E(["--quick", "--workload", "jsonl"], quiet)).rejects.toThrow(
    "the jsonl workload needs a file path (--workload-file)",
  );
});

test("serving reads --workload-file as the jsonl workload and refuses it beside another workload", async () => {
  const { runServing } = await import("../../../bench/serving.ts");
  const quiet = () => {};
  await expect(runServing(["--workload", "random", "--workload-file", "x.jsonl"], quiet)).rejects.toThrow(
    '--workload-file is read by --workload jsonl only, got --workload "random"',
  );
  // A file alone selects the jsonl workload: the reader's own error shows it went to read that file.
  await expect(runServing(["--workload-file", "/nonexistent/trace.jsonl"], quiet)).rejects.toThrow(
    /^cannot read JSONL workload \/nonexistent\/trace\.jsonl/,
  );
  // --quick's short-request options shape generated workloads only; the published file runs as it is.
  await expect(
    runServing([
      "--workload",
      "random-256",
      "--quick",
      "--base-url",
      "http://127.0.0.1:1",
      "--model",
      "m",
      "--num-prompts",
      "1",
      "--request-rate",
      "inf",
    ], quiet),
  ).resolves.toContain("Successful requests");
});

test("throughput refuses a --workload that its --quick form would not read", async () => {
  const { default: throughput } = await import("../../../bench/throughput.ts");
  await expect(throughput.run(["--quick", "--workload", "x.jsonl"])).rejects.toThrow(
    '--workload "x.jsonl" does not apply to --quick, which runs its own short generated requests',
  );
});
