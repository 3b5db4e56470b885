/**
 * Offline throughput of the single-GPU engine on the workload compact engines report: 256
 * requests of random token ids, prompt and output lengths uniform in 100..1024, ignore_eos
 * (bench/workloads/data/random-256.jsonl, which the repository ships).
 * Reports output tok/s and total time against the reference points measured on one H200, and
 * where step time goes: native step time per step kind versus TypeScript time per step.
 *
 *   bun bench throughput                      Qwen3-0.6B shape (synthetic weights) on the default backend
 *   bun bench throughput --model <dir>        a real model directory
 *   bun bench throughput --quick              16 short requests, tiny model, CPU backend (seconds)
 * @module
 */
import { parseArgs } from "node:util";
import { resolve } from "node:path";
import type { BackendKind } from "../ffi/loader.ts";
import type { RequestOutput } from "../lib/core/outputs.ts";
import { LLM } from "../lib/engine/llm.ts";
import type { StepKindTotals } from "../lib/local/step_timings.ts";
import { ensureModel } from "../lib/model/demo_model.ts";
import { isPresetName, PRESET_NAMES } from "../lib/model/presets.ts";
import type { BenchEntry } from "./entry.ts";
import { readJsonlWorkload } from "./workloads/jsonl.ts";
import { randomLengthsWorkload, readRandom256 } from "./workloads/random_lengths.ts";
import type { Workload } from "./workloads/types.ts";

/** Reference points for random-256 on one H200 (the Python LMPool measurement and the targets set against it). */
export const REFERENCE = {
  pythonTokPerS: 1614,
  pythonSeconds: 83.0,
  targetTokPerS: 16000,
  rooflineTokPerS: 36500,
} as const;

/** Options of one throughput run. */
export interface ThroughputOptions {
  modelDir: string;
  workload: Workload;
  backend?: BackendKind;
  blockSize?: number;
  numBlocks?: number;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  gpuMemoryUtilization?: number;
  maxModelLen?: number;
  /** Decode output text (default true; vLLM's benchmark can skip it too). */
  detokenize?: boolean;
}

/** What a run measured. */
export interface ThroughputResult {
  numRequests: number;
  promptTokens: number;
  outputTokens: number;
  seconds: number;
  outputTokPerS: number;
  totalTokPerS: number;
  backend: BackendKind;
  numBlocks: number;
  blockSize: number;
  byKind: Record<string, StepKindTotals>;
  /** Mean TypeScript time (step minus native call) per step, ms. */
  tsMsPerStep: number;
  /** Wall time outside steps (event-loop yields, output delivery), ms. */
  loopOverheadMs: number;
  preemptions: number;
  detokenize: boolean;
}

/** Runs the workload once (after a short warm-up) and measures it. */
export async function runThroughput(o: ThroughputOptions): Promise<ThroughputResult> {
  const longest = Math.max(...o.workload.requests.map((r) => (r.promptTokenIds?.length ?? 0) + r.maxTokens));
  await using llm = await LLM.create({
    model: o.modelDir,
    backend: o.backend,
    blockSize: o.blockSize,
    numBlocks: o.numBlocks,
    maxNumSeqs: o.maxNumSeqs,
    maxNumBatchedTokens: o.maxNumBatchedTokens,
    gpuMemoryUtilization: o.gpuMemoryUtilization,
    maxModelLen: o.maxModelLen ?? longest,
    detokenize: o.detokenize,
  });
  // Warm-up: first calls allocate, build graphs, fault pages in.
  await llm.generate([{ promptTokenIds: [1, 2, 3, 4, 5, 6, 7, 8] }, { promptTokenIds: [9, 10, 11] }], {
    maxTokens: 4,
    ignoreEos: true,
  });
  llm.engine.timings.reset();
  const preempt0 = llm.engine.scheduler.numPreemptions;
  const requests = o.workload.requests;
  const t0 = performance.now();
  const outputs = await Promise.all(
    requests.map((r) =>
      llm.generate({ promptTokenIds: r.promptTokenIds! }, {
        maxTokens: r.maxTokens,
        ignoreEos: r.ignoreEos ?? true,
        temperature: r.temperature ?? 0.6,
      })
        .then((x) => x[0]!)
    ),
  );
  const seconds = (performance.now() - t0) / 1000;
  const outputTokens = outputs.reduce((s: number, x: RequestOutput) => s + x.tokenIds.length, 0);
  const promptTokens = requests.reduce((s, r) => s + r.promptTokenIds!.length, 0);
  const total = llm.engine.timings.total();
  return {
    numRequests: requests.length,
    promptTokens,
    outputTokens,
    seconds,
    outputTokPerS: outputTokens / seconds,
    totalTokPerS: (outputTokens + promptTokens) / seconds,
    backend: llm.config.backend,
    numBlocks: llm.config.numBlocks,
    blockSize: llm.config.blockSize,
    byKind: structuredClone(llm.engine.timings.byKind),
    tsMsPerStep: total.steps > 0 ? (total.totalMs - total.nativeMs) / total.steps : 0,
    loopOverheadMs: seconds * 1000 - total.totalMs,
    preemptions: llm.engine.scheduler.numPreemptions - preempt0,
    detokenize: o.detokenize ?? true,
  };
}

/** Human-readable report of a run. */
export function formatThroughput(r: ThroughputResult, workloadName: string): string {
  const f = (x: number, d = 0) => x.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
  const lines = [
    `throughput [${workloadName}] ${r.numRequests} requests, ${f(r.promptTokens)} prompt + ${
      f(r.outputTokens)
    } output tokens, ${r.backend}, ${r.numBlocks} blocks x ${r.blockSize} tokens${
      r.detokenize ? "" : ", no detokenization"
    }`,
    `  total time ${f(r.seconds, 2)} s | output ${f(r.outputTokPerS)} tok/s | prompt+output ${
      f(r.totalTokPerS)
    } tok/s | preemptions ${r.preemptions}`,
  ];
  for (const [kind, k] of Object.entries(r.byKind)) {
    if (k.steps === 0) continue;
    lines.push(
      `  ${kind.padEnd(7)} ${String(k.steps).padStart(6)} steps ${f(k.tokens).padStart(9)} tokens | native ${
        f(k.nativeMs / 1000, 2)
      } s (${f(k.nativeMs / k.steps, 2)} ms/step) | TS ${f((k.totalMs - k.nativeMs) / 1000, 2)} s (${
        f((k.totalMs - k.nativeMs) / k.steps, 3)
      } ms/step)`,
    );
  }
  lines.push(
    `  TS per step ${f(r.tsMsPerStep, 3)} ms; outside steps (event loop, delivery) ${f(r.loopOverheadMs / 1000, 2)} s`,
  );
  if (workloadName.startsWith("random-256")) {
    lines.push(
      `  reference on one H200: Python LMPool ${
        f(REFERENCE.pythonTokPerS)
      } tok/s (${REFERENCE.pythonSeconds} s); target >= ${f(REFERENCE.targetTokPerS)} tok/s; ` +
        `roofline ~${f(REFERENCE.rooflineTokPerS)} tok/s -> this run is ${
          f((100 * r.outputTokPerS) / REFERENCE.targetTokPerS, 1)
        }% of target, ${f((100 * r.outputTokPerS) / REFERENCE.rooflineTokPerS, 1)}% of roofline`,
    );
  }
  return lines.join("\n");
}

const USAGE = `bun bench throughput [--quick] [--workload file.jsonl] [--model dir | --preset name] [--backend cpu|cuda]
  [--num-requests N] [--block-size N] [--num-blocks N] [--max-num-seqs N] [--max-num-batched-tokens N]
  [--gpu-memory-utilization F] [--no-detokenize] [--json]`;

function int(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new RangeError(`--${name} must be a positive integer, got ${JSON.stringify(v)}`);
  }
  return n;
}

const entry: BenchEntry = {
  name: "throughput",
  description:
    "offline throughput of one engine on random-256 (output tok/s vs 16k target / ~36.5k H200 roofline; native vs TS step time)",
  async run(argv: string[]): Promise<void> {
    const { values: a } = parseArgs({
      args: argv,
      strict: true,
      options: {
        quick: { type: "boolean" },
        help: { type: "boolean", short: "h" },
        json: { type: "boolean" },
        "no-detokenize": { type: "boolean" },
        workload: { type: "string" },
        model: { type: "string" },
        preset: { type: "string" },
        backend: { type: "string" },
        "num-requests": { type: "string" },
        "block-size": { type: "string" },
        "num-blocks": { type: "string" },
        "max-num-seqs": { type: "string" },
        "max-num-batched-tokens": { type: "string" },
        "gpu-memory-utilization": { type: "string" },
      },
    });
    if (a.help) return console.log(USAGE);
    if (a.backend !== undefined && a.backend !== "cpu" && a.backend !== "cuda") {
      throw new RangeError(`--backend must be cpu or cuda, got ${a.backend}`);
    }
    const preset = a.preset ?? (a.quick ? "tiny" : "qwen3-0.6b");
    if (!isPresetName(preset)) {
      throw new RangeError(`--preset must be one of ${PRESET_NAMES.join(", ")}, got ${JSON.stringify(preset)}`);
    }
    const numRequests = int("num-requests", a["num-requests"]);
    let workload: Workload;
    if (a.quick) {
      if (a.workload !== undefined) {
        throw new RangeError(
          `--workload ${
            JSON.stringify(a.workload)
          } does not apply to --quick, which runs its own short generated requests`,
        );
      }
      workload = randomLengthsWorkload({
        numRequests: numRequests ?? 16,
        inputTokens: [16, 64],
        outputTokens: [8, 24],
      });
      workload.name = "random-quick";
    } else {
      workload = a.workload ? readJsonlWorkload(resolve(a.workload)) : readRandom256();
      if (numRequests !== undefined) workload.requests = workload.requests.slice(0, numRequests);
    }
    const modelDir = a.model ?? (await ensureModel(preset));
    const result = await runThroughput({
      modelDir,
      workload,
      backend: (a.backend as BackendKind | undefined) ?? (a.quick ? "cpu" : undefined),
      blockSize: int("block-size", a["block-size"]),
      numBlocks: int("num-blocks", a["num-blocks"]),
      maxNumSeqs: int("max-num-seqs", a["max-num-seqs"]),
      maxNumBatchedTokens: int("max-num-batched-tokens", a["max-num-batched-tokens"]),
      gpuMemoryUtilization: a["gpu-memory-utilization"] === undefined ? undefined : Number(a["gpu-memory-utilization"]),
      detokenize: !a["no-detokenize"],
    });
    console.log(formatThroughput(result, workload.name));
    if (a.json) console.log(JSON.stringify({ workload: workload.name, modelDir, ...result }));
  },
};

export default entry;
