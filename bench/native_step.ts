/**
 * `bun bench native_step`: one forward step of the native library on the Qwen3-0.6B shape with
 * random bf16 weights (built in memory, no files), against ceilings measured in the same run:
 * decode step time at batch 1/16/64/256 (context 1024) vs the weights + KV read roofline at the
 * measured copy bandwidth, and prefill tokens/s at 8 x 2048 vs the measured bf16 GEMM peak.
 * `--quick` runs a tiny shape on the CPU backend in a couple of seconds; `--out <file>` writes
 * the results as JSON (e.g. bench/results/native_step.json); `--profile` runs only one prefill
 * and a few batch-1 decode steps, a short target for a kernel profiler (ncu); `--batches 1,2,4`
 * measures other decode batch sizes instead.
 *
 * `--sweep decode,prefill,mixed` (any subset) runs the calibration sweeps of bench/calibration/
 * instead: decode over batch x context wherever the KV cache holds it, prefill chunks behind
 * cached prefixes, and prefill chunks beside decode batches; each point is the median device time
 * of its timed steps after warm-up. `--out` then writes the sweep file that `bun bench calibrate
 * --from` fits; with `--quick` a small grid runs on the tiny shape on the CPU backend.
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { Native, type NativeModelConfig } from "../ffi/native.ts";
import { parseModelSpec } from "../lib/model/config.ts";
import { presetConfig } from "../lib/model/presets.ts";
import { buildSyntheticModel, makeStep, timeMs } from "./calibration/synthetic_model.ts";
import { FULL_SWEEP_GRID, parseSweepKinds, QUICK_SWEEP_GRID, type SweepKind } from "./calibration/sweep_grid.ts";
import { FULL_SWEEP_TIMING, QUICK_SWEEP_TIMING, runSweep } from "./calibration/sweep_run.ts";
import { formatSweepTable } from "./calibration/sweep_table.ts";
import { intListOption } from "./cli_options.ts";
import type { BenchEntry } from "./entry.ts";
import { collectMetadata } from "./report/metadata.ts";
import { percentile } from "./stats/percentile.ts";

/** What one run measures. */
interface Plan {
  backend: "cpu" | "cuda" | undefined;
  config: NativeModelConfig;
  blockSize: number;
  decodeBatches: number[];
  context: number;
  prefillSeqs: number;
  prefillLen: number;
  decodeIters: number;
  /** Decode steps run for at least this long before each batch size is timed (see below). */
  decodeWarmupMs: number;
  copy: { bytes: number; iters: number };
  gemm: { m: number; n: number; k: number; iters: number };
}

const QWEN3_06B: NativeModelConfig = parseModelSpec(presetConfig("qwen3-0.6b")).native;

const FULL: Plan = {
  backend: undefined,
  config: QWEN3_06B,
  blockSize: 256,
  decodeBatches: [1, 16, 64, 256],
  context: 1024,
  prefillSeqs: 8,
  prefillLen: 2048,
  decodeIters: 20,
  decodeWarmupMs: 300,
  copy: { bytes: 2 ** 31, iters: 10 },
  gemm: { m: 8192, n: 8192, k: 8192, iters: 20 },
};

const QUICK: Plan = {
  backend: "cpu",
  config: {
    ...QWEN3_06B,
    vocabSize: 2048,
    hiddenSize: 128,
    intermediateSize: 256,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 32,
  },
  blockSize: 16,
  decodeBatches: [1, 4, 16],
  context: 64,
  prefillSeqs: 4,
  prefillLen: 128,
  decodeIters: 5,
  decodeWarmupMs: 0,
  copy: { bytes: 2 ** 25, iters: 5 },
  gemm: { m: 256, n: 256, k: 256, iters: 3 },
};

const fmt = (x: number, d = 2) => x.toFixed(d);

/** A rate with an SI prefix: si(4.3e12, "B/s") is "4.30 TB/s". */
function si(x: number, unit: string): string {
  const prefixes: [number, string][] = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  const [scale, p] = prefixes.find(([v]) => Math.abs(x) >= v) ?? [1, ""];
  return `${(x / scale).toFixed(2)} ${p}${unit}`;
}

async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: "boolean" },
      out: { type: "string" },
      profile: { type: "boolean" },
      batches: { type: "string" },
      sweep: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(
      "usage: bun bench native_step [--quick] [--profile] [--batches 1,16] [--out results.json]\n" +
        "       bun bench native_step --sweep decode,prefill,mixed [--quick] [--out sweep.json]",
    );
    return;
  }
  if (values.sweep !== undefined) {
    for (const flag of ["profile", "batches"] as const) {
      if (values[flag] !== undefined) throw new RangeError(`--${flag} does not apply to --sweep; leave one out`);
    }
    return runSweeps(parseSweepKinds(values.sweep), values.quick ?? false, values.out, argv);
  }
  const base = values.quick ? QUICK : FULL;
  const chosen: Plan = values.profile
    ? {
      ...base,
      decodeBatches: [1],
      decodeIters: 5,
      decodeWarmupMs: 0,
      copy: { bytes: 2 ** 20, iters: 1 },
      gemm: { m: 256, n: 256, k: 256, iters: 1 },
    }
    : base;
  const batches = values.batches === undefined ? chosen.decodeBatches : intListOption("batches", values.batches);
  if (batches.length === 0 || batches.includes(0)) {
    throw new RangeError(`--batches must list positive batch sizes, got ${JSON.stringify(values.batches)}`);
  }
  const plan: Plan = { ...chosen, decodeBatches: batches };
  const native = new Native(plan.backend ? { backend: plan.backend } : {});
  const c = plan.config, bs = plan.blockSize;
  console.log(`native_step on the ${native.backend} backend (${native.path})`);

  const copyBw = native.benchCopyBandwidth(plan.copy.bytes, plan.copy.iters);
  const gemmPeak = native.benchGemmBf16(plan.gemm.m, plan.gemm.n, plan.gemm.k, plan.gemm.iters);
  console.log(
    `ceilings: copy ${si(copyBw, "B/s")} (read + write), bf16 GEMM ${si(gemmPeak, "FLOP/s")} (${plan.gemm.m}^3)`,
  );

  const maxBatch = Math.max(...plan.decodeBatches);
  const prefillTokens = plan.prefillSeqs * plan.prefillLen;
  const model = buildSyntheticModel(native, c, Math.max(prefillTokens, maxBatch), Math.max(maxBatch, plan.prefillSeqs));
  const ctxBlocks = plan.context / bs, prefillBlocks = plan.prefillLen / bs, perStep = plan.prefillSeqs * prefillBlocks;
  const numBlocks = Math.ceil(Math.max(maxBatch * ctxBlocks, perStep) / perStep) * perStep;
  const kv = model.createKvCache(numBlocks, bs);

  // Prefill: fresh sequences over consecutive block ranges; these also fill the KV the decode reads.
  const H = c.hiddenSize, I = c.intermediateSize, D = c.headDim, L = c.numLayers;
  const qkvDim = (c.numHeads + 2 * c.numKvHeads) * D;
  const layerParams = H * qkvDim + c.numHeads * D * H + 3 * I * H;
  const prefillFlops = 2 * L * layerParams * prefillTokens +
    4 * L * c.numHeads * D * plan.prefillSeqs * (plan.prefillLen * (plan.prefillLen + 1)) / 2 +
    2 * c.vocabSize * H * plan.prefillSeqs;
  const prefillMs: number[] = [];
  const prefillSteps = values.profile ? 2 : Math.max(4, numBlocks / perStep);
  for (let i = 0; i < prefillSteps; i++) {
    const b = makeStep(
      plan.prefillSeqs,
      plan.prefillLen,
      0,
      (i * perStep) % numBlocks,
      prefillBlocks,
      bs,
      c.vocabSize,
      i + 1,
    );
    const ms = timeMs(() => model.step(kv, b));
    if (i > 0) prefillMs.push(ms);
  }
  const prefillMedian = percentile(prefillMs, 50);
  const prefillTokS = prefillTokens / (prefillMedian / 1e3);
  const prefillFlopS = prefillFlops / (prefillMedian / 1e3);

  // Decode: one token per sequence at position context - 1, over the prefilled blocks.
  const elem = native.backend === "cpu" ? 4 : 2;
  const weightBytes = elem * (L * (layerParams + 2 * H + (c.arch === "qwen3" ? 2 * D : 0)) + H + c.vocabSize * H);
  const kvBytesPerToken = L * 2 * c.numKvHeads * D * elem;
  const decode = plan.decodeBatches.map((batch) => {
    const times: number[] = [], deviceTimes: number[] = [];
    // The prefill before runs at the power cap, and the clocks take a while to recover: on an H200
    // batch-1 steps right after it were 8-10% slower than after a pause. Warm up by time, not count.
    const warmUntil = performance.now() + plan.decodeWarmupMs;
    for (let w = 0; performance.now() < warmUntil; w++) {
      model.step(kv, makeStep(batch, 1, plan.context - 1, 0, ctxBlocks, bs, c.vocabSize, 500 + (w % 100)));
    }
    for (let i = 0; i < plan.decodeIters + 3; i++) {
      const b = makeStep(batch, 1, plan.context - 1, 0, ctxBlocks, bs, c.vocabSize, 1000 + i);
      const ms = timeMs(() => model.step(kv, b));
      if (i >= 3) times.push(ms), deviceTimes.push(model.lastStepMs());
    }
    const ms = percentile(times, 50);
    // The step's own execution time (device events on CUDA): the rest of `ms` is host overhead.
    const deviceMs = percentile(deviceTimes, 50);
    const bytes = weightBytes + batch * plan.context * kvBytesPerToken;
    const ceilingMs = (bytes / copyBw) * 1e3;
    return {
      batch,
      context: plan.context,
      medianMs: ms,
      deviceMs,
      bytes,
      ceilingMs,
      fractionOfRoofline: ceilingMs / ms,
      achievedBytesPerS: bytes / (ms / 1e3),
    };
  });

  console.log(
    `\ndecode, context ${plan.context}, block ${bs} (ceiling: (weights ${
      fmt(weightBytes / 1e9, 3)
    } GB + KV) / copy bandwidth)`,
  );
  console.log("  batch   step ms   device ms   ceiling ms   of roofline   achieved");
  for (const d of decode) {
    console.log(
      `  ${String(d.batch).padStart(5)}   ${fmt(d.medianMs, 3).padStart(7)}   ${fmt(d.deviceMs, 3).padStart(9)}   ${
        fmt(d.ceilingMs, 3).padStart(10)
      }   ${(fmt(100 * d.fractionOfRoofline, 1) + "%").padStart(11)}   ${si(d.achievedBytesPerS, "B/s").padStart(11)}`,
    );
  }
  console.log(
    `\nprefill ${plan.prefillSeqs} x ${plan.prefillLen}: ${fmt(prefillMedian, 2)} ms/step, ${
      fmt(prefillTokS, 0)
    } tokens/s; ` +
      `${si(prefillFlopS, "FLOP/s")} of model FLOPs = ${fmt((100 * prefillFlopS) / gemmPeak, 1)}% of the GEMM peak ` +
      `(ceiling ${fmt(gemmPeak / (prefillFlops / prefillTokens), 0)} tokens/s)`,
  );

  if (values.out) {
    const result = {
      metadata: collectMetadata({ command: ["bench", "native_step", ...argv], model: { ...c, blockSize: bs } }),
      backend: native.backend,
      ceilings: { copyBytesPerS: copyBw, gemmBf16FlopsPerS: gemmPeak, gemmShape: plan.gemm },
      decode,
      prefill: {
        seqs: plan.prefillSeqs,
        len: plan.prefillLen,
        medianMs: prefillMedian,
        tokensPerS: prefillTokS,
        flopsPerStep: prefillFlops,
        modelFlopsPerS: prefillFlopS,
        fractionOfGemmPeak: prefillFlopS / gemmPeak,
        samplesMs: prefillMs,
      },
    };
    mkdirSync(dirname(values.out), { recursive: true });
    writeFileSync(values.out, JSON.stringify(result, null, 2));
    console.log(`\nwrote ${values.out}`);
  }
  kv.dispose();
  model.dispose();
}

/** The calibration sweeps (see the module doc), printed and optionally written to `out`. */
function runSweeps(kinds: SweepKind[], quick: boolean, out: string | undefined, argv: string[]): void {
  const plan = quick ? QUICK : FULL;
  const native = new Native(plan.backend ? { backend: plan.backend } : {});
  const metadata = collectMetadata({
    command: ["bench", "native_step", ...argv],
    model: { ...plan.config, blockSize: plan.blockSize },
  });
  console.log(`native_step --sweep ${kinds.join(",")} on the ${native.backend} backend (${native.path})`);
  const sweep = runSweep({
    native,
    config: plan.config,
    modelName: quick ? "qwen3-0.6b (tiny shape)" : "qwen3-0.6b",
    blockSize: plan.blockSize,
    grid: quick ? QUICK_SWEEP_GRID : FULL_SWEEP_GRID,
    kinds,
    timing: quick ? QUICK_SWEEP_TIMING : FULL_SWEEP_TIMING,
    device: native.backend === "cuda" ? (metadata.gpus[0]?.name ?? "cuda") : "cpu",
    copy: plan.copy,
  });
  console.log(formatSweepTable(sweep));
  if (out) {
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify({ ...sweep, metadata }, null, 2));
    console.log(`\nwrote ${out}`);
  }
}

/** The native step benchmark entry. */
const entry: BenchEntry = {
  name: "native_step",
  description:
    "forward step, Qwen3-0.6B shape: decode ms vs weights+KV roofline, prefill tokens/s vs bf16 GEMM peak; --sweep for calibration",
  run,
};
export default entry;
