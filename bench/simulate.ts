/**
 * `bun bench simulate`: the cluster simulator. Runs `bun bench e2e`'s workloads and configurations
 * on simulated clusters of 1 to 64+ GPUs: the production control plane (routing policies, Global
 * Block Manager, transfer planner, cost gate and coordinator) on virtual time, over workers whose
 * scheduler and block manager are the real ones and whose steps take the calibrated engine model's
 * time (bench/calibration/). Writes e2e's report layout (results.json, summary.md, SVG charts) with
 * one repetition per seed, plus each run's simulated seconds per wall second and conservation audit.
 * @module
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parseModelSpec } from "../lib/model/config.ts";
import { isPresetName, presetConfig } from "../lib/model/presets.ts";
import { DEFAULT_STEP_TARGET_MS } from "../lib/local/step_budget.ts";
import { DEFAULT_ENGINE_PROFILE_PATH, loadEngineProfile } from "./calibration/engine_profile.ts";
import { intOption, numberOption } from "./cli_options.ts";
import type { BenchEntry } from "./entry.ts";
import { collectMetadata } from "./report/metadata.ts";
import { type BenchResults, RESULTS_SCHEMA, type ScenarioResult } from "./report/schema.ts";
import { writeRequestLog } from "./report/request_log.ts";
import { scenarioSection } from "./report/summary_md.ts";
import { createResultsDir, toJson, writeArtifacts } from "./report/write_artifacts.ts";
import { DEFAULT_DEVICE_LOCAL_COPY, LINK_KINDS, type LinkKind } from "./simulator/cluster_layout.ts";
import {
  simulateConfiguration,
  SIMULATED_CONFIGURATIONS,
  type SimulatedRunSummary,
  type SimulationSettings,
} from "./simulator/simulate_configurations.ts";
import { simulationSection } from "./simulator/simulation_report.ts";
import { scaleCharts, type ScalePoint, scaleTable } from "./simulator/scale_report.ts";
import { NO_PERTURBATION, parsePerturbation } from "./simulator/step_timer.ts";
import { profileTrace } from "./trace_profile.ts";
import { jsonObjectOption, selectWorkloads, WORKLOAD_FLAG_OPTIONS } from "./workload_flags.ts";
import { describeArrival } from "./driver/arrival.ts";
import type { RequestRecord } from "./driver/request_record.ts";
import { rungRows } from "./report/rung_table.ts";
import { WORKLOAD_NAMES } from "./workloads/registry.ts";

/** Configurations of --quick: the validation four, so CI checks the policies the issue compares. */
export const QUICK_SIM_CONFIGURATIONS = ["round-robin", "cache-aware", "lmpool-routing", "lmpool"];

/**
 * Slowdown of steps beyond fair sharing while two ranks' steps share one GPU, and a worker
 * process's host time per step, from real runs with two ranks on one H200: the host time from their
 * per-step traces (LMPOOL_TRACE_STEPS), the penalties fitted to the throughput of round-robin and
 * cache-aware on two workloads of different step mixes (see the README's simulator section). The
 * profile's host overhead is the in-process engine's, which skips the worker's messages and reports.
 */
export const DEFAULT_SHARED_GPU_PENALTY = { decode: 2.2, other: 1.3 };
/** See {@link DEFAULT_SHARED_GPU_PENALTY}. */
export const DEFAULT_WORKER_HOST_MS = 0.5;

/** KV bytes a GPU gives its cache when no --kv-blocks is set (an H200's 141 GB less weights and activations). */
const DEFAULT_KV_BYTES_PER_GPU = 120e9;

const HELP = `usage: bun bench simulate [options]
  --quick                 8 GPUs, locality 1x, 2 seeds, configurations ${QUICK_SIM_CONFIGURATIONS.join(",")}
  --workload A,B          any of ${Object.keys(WORKLOAD_NAMES).join(" | ")} (token-id workloads; default locality)
  --scales, --workload-file, --workload-options, --first, --start, --duration, --max-input, --max-output,
  --speedup, --arrival, --max-in-flight, --seed
                          as in \`bun bench e2e\` (--seed is the first seed)
  --configs a,b           subset of ${SIMULATED_CONFIGURATIONS.join(",")} (default: all)
  --gpus N[,N...]         simulated GPUs (default 2); a list runs every workload at each size (a scale sweep:
                          scale.md and SVG charts of throughput and TTFT against GPUs)
  --per-gpu JSON          workload options multiplied by the GPU count, e.g. '{"numRequests":24,"maxInFlight":2}'
  --speedup-per-gpu X     mooncake with --arrival trace: replay X x GPUs times faster
  --ranks-per-gpu K       ranks sharing each GPU's compute (default 1; 2 with --gpus 1 models --gpus 0,0)
  --topology KIND         GPU links: pairs (NVLink pairs 0-1, 2-3, ...) | all (NVSwitch) | none (default pairs)
  --device-local-copy on|off  ranks of one GPU copy KV between them (default on, as LLMEngine)
  --seeds S               runs per configuration, seeds --seed .. --seed+S-1 (default 3)
  --profile FILE          engine profile (default ${DEFAULT_ENGINE_PROFILE_PATH})
  --perturb SPEC          engines depart from the profile: noise=0.15,prefill=0.1,decode=-0.1 | none (default none)
  --kv-blocks N           KV blocks per rank (default: the workload's, else the GPU's share of ${
  DEFAULT_KV_BYTES_PER_GPU / 1e9
} GB)
  --block-size N          tokens per block (default: the workload's, else 256)
  --message-ms X          one-way latency of a message between processes (default 0.05)
  --shared-gpu-penalty D,O  extra slowdown of decode-only (D) and other (O) steps while ranks share a GPU, >= 1
                          (default ${DEFAULT_SHARED_GPU_PENALTY.decode},${DEFAULT_SHARED_GPU_PENALTY.other}: one H200, two ranks; 1,1 is ideal time-slicing)
  --host-overhead-ms X    host time per step instead of the profile's (default ${DEFAULT_WORKER_HOST_MS}: a worker
                          process's measured time between native steps)
  --transfer-mode MODE    auto | force (default auto)
  --transfer-options JSON transfer settings of the transfer configurations
  --model NAME            model preset whose context and vocabulary bound the workloads (default qwen3-0.6b)
  --save-requests         also write each seed's per-request records (JSON lines) under <out>/requests/
  --out DIR               results directory (default bench/results/<UTC timestamp>)`;

/** Runs the simulator with command-line `argv`; returns the results and where they went (null for --help). */
export async function runSimulate(
  argv: string[],
  log: (line: string) => void = console.log,
): Promise<{ results: BenchResults; dir: string; runs: SimulatedRunSummary[] } | null> {
  const { values: a } = parseArgs({
    args: argv,
    options: {
      ...WORKLOAD_FLAG_OPTIONS,
      quick: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      configs: { type: "string" },
      gpus: { type: "string" },
      "per-gpu": { type: "string" },
      "speedup-per-gpu": { type: "string" },
      "ranks-per-gpu": { type: "string" },
      topology: { type: "string" },
      "device-local-copy": { type: "string" },
      seeds: { type: "string" },
      profile: { type: "string" },
      perturb: { type: "string" },
      "kv-blocks": { type: "string" },
      "block-size": { type: "string" },
      "message-ms": { type: "string" },
      "shared-gpu-penalty": { type: "string" },
      "host-overhead-ms": { type: "string" },
      "transfer-mode": { type: "string" },
      "transfer-options": { type: "string" },
      model: { type: "string" },
      out: { type: "string" },
      "save-requests": { type: "boolean" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (a.help) {
    log(HELP);
    return null;
  }
  const quick = a.quick ?? false;
  const sel = selectWorkloads(a, { defaultScales: quick ? "1" : "1,3,5" });
  const gpuList = (a.gpus ?? (quick ? "8" : "2")).split(",").map((t) => intOption("gpus", t.trim(), 2));
  const perGpu = jsonObjectOption("per-gpu", a["per-gpu"]);
  for (const [k, v] of Object.entries(perGpu)) {
    if (typeof v !== "number" || !(v > 0)) {
      throw new RangeError(`--per-gpu ${k} must be a number > 0, got ${String(v)}`);
    }
  }
  const speedupPerGpu = numberOption("speedup-per-gpu", a["speedup-per-gpu"], 0, true);
  if (speedupPerGpu !== undefined && a.arrival !== "trace") {
    throw new RangeError(
      `--speedup-per-gpu scales a trace's pace and needs --arrival trace, got --arrival ${a.arrival}`,
    );
  }
  const notTraces = sel.specs.filter((s) => s.name !== "mooncake").map((s) => s.name);
  if (speedupPerGpu !== undefined && notTraces.length > 0) {
    throw new RangeError(`--speedup-per-gpu paces a mooncake trace only; not ${notTraces.join(", ")}`);
  }
  const given = jsonObjectOption("workload-options", a["workload-options"]);
  const both = Object.keys(perGpu).filter((k) => k in given);
  if (both.length > 0) {
    throw new RangeError(`--per-gpu and --workload-options both set ${both.join(", ")}; give each in one of them`);
  }
  if (speedupPerGpu !== undefined && a.speedup !== undefined) {
    throw new RangeError("--speedup and --speedup-per-gpu set the same pace; give one of them");
  }
  const ranksPerGpu = intOption("ranks-per-gpu", a["ranks-per-gpu"], 1);
  const links = (a.topology ?? "pairs") as LinkKind;
  if (!LINK_KINDS.includes(links)) {
    throw new RangeError(`--topology must be one of ${LINK_KINDS.join(", ")}, got ${JSON.stringify(a.topology)}`);
  }
  const localCopy = a["device-local-copy"] ?? "on";
  if (localCopy !== "on" && localCopy !== "off") {
    throw new RangeError(`--device-local-copy must be on or off, got ${JSON.stringify(localCopy)}`);
  }
  const numSeeds = intOption("seeds", a.seeds, quick ? 2 : 3);
  const seeds = Array.from({ length: numSeeds }, (_, i) => sel.seed + i);
  const profilePath = a.profile ?? DEFAULT_ENGINE_PROFILE_PATH;
  const profile = loadEngineProfile(profilePath);
  const perturbation = a.perturb === undefined ? NO_PERTURBATION : parsePerturbation(a.perturb);
  const messageMs = numberOption("message-ms", a["message-ms"], 0) ?? 0.05;
  const sharedGpuPenalty = a["shared-gpu-penalty"] === undefined
    ? DEFAULT_SHARED_GPU_PENALTY
    : penaltyOption(a["shared-gpu-penalty"]);
  const hostOverheadMs = numberOption("host-overhead-ms", a["host-overhead-ms"], 0) ?? DEFAULT_WORKER_HOST_MS;
  const transferMode = a["transfer-mode"] ?? "auto";
  if (transferMode !== "auto" && transferMode !== "force") {
    throw new RangeError(`--transfer-mode must be auto or force, got ${JSON.stringify(transferMode)}`);
  }
  const transferOptions = jsonObjectOption("transfer-options", a["transfer-options"]);
  const modelName = a.model ?? "qwen3-0.6b";
  if (!isPresetName(modelName)) throw new RangeError(`--model must be a preset name, got ${JSON.stringify(modelName)}`);
  if (profile.model.name !== modelName) {
    throw new RangeError(
      `--model ${modelName} does not match the profile's model ${profile.model.name} (${profilePath}); give a profile made for it`,
    );
  }
  const modelJson = presetConfig(modelName) as unknown as Record<string, unknown>;
  const maxModelLen = parseModelSpec(presetConfig(modelName)).maxModelLen;
  const configNames = (a.configs ?? (quick ? QUICK_SIM_CONFIGURATIONS : SIMULATED_CONFIGURATIONS).join(","))
    .split(",").map((s) => s.trim()).filter(Boolean);
  for (const n of configNames) {
    if (!(SIMULATED_CONFIGURATIONS as readonly string[]).includes(n)) {
      throw new RangeError(`unknown configuration ${JSON.stringify(n)}; known: ${SIMULATED_CONFIGURATIONS.join(", ")}`);
    }
  }
  log(
    `simulate: ${gpuList.join(",")} GPUs x ${ranksPerGpu} rank${ranksPerGpu === 1 ? "" : "s"}, links ${links}, ` +
      `seeds ${seeds.join(",")}, profile ${profilePath}, perturbation ${a.perturb ?? "none"}`,
  );
  const scenarios: ScenarioResult[] = [];
  const allRuns: SimulatedRunSummary[] = [];
  const results: BenchResults = {
    schema: RESULTS_SCHEMA,
    entry: "simulate",
    metadata: collectMetadata({
      command: ["bun", "bench", "simulate", ...argv],
      model: { name: modelName },
      seeds: { workload: sel.seed },
      extra: {
        simulated: true,
        gpus: gpuList,
        ranksPerGpu,
        links,
        deviceLocalCopy: localCopy === "on",
        seeds,
        profile: profilePath,
        profileSource: profile.source,
        transferSource: profile.transfer.source,
        perturbation,
        messageMs,
        sharedGpuPenalty,
        hostOverheadMs,
      },
    }),
    scenarios,
  };
  const dir = a.out ?? createResultsDir();
  const scale: ScalePoint[] = [];
  for (const baseSpec of sel.specs) {
    for (const gpus of gpuList) {
      const scaled: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(perGpu)) scaled[k] = Math.round((v as number) * gpus);
      if (speedupPerGpu !== undefined && baseSpec.name === "mooncake") scaled.speedup = speedupPerGpu * gpus;
      const spec = { ...baseSpec, overrides: { ...baseSpec.overrides, ...scaled } };
      const load = Object.entries(scaled).map(([k, v]) => `${k} ${v}`).join(", ") || "as given";
      const firstRun = sel.build(spec, modelJson);
      const first = firstRun.workload;
      const scenarioName = gpuList.length > 1 ? `${first.name} @ ${gpus} GPUs` : first.name;
      const runFor = (seed: number) => (seed === sel.seed ? firstRun : sel.build(spec, modelJson, seed));
      const blockSize = a["block-size"] === undefined
        ? first.settings.blockSize ?? 256
        : intOption("block-size", a["block-size"], 256);
      const numBlocks = a["kv-blocks"] === undefined
        ? first.settings.kvBlocksPerGpu ??
          Math.floor(DEFAULT_KV_BYTES_PER_GPU / (profile.model.kvBytesPerToken * blockSize) / ranksPerGpu)
        : intOption("kv-blocks", a["kv-blocks"], 1);
      const settings: SimulationSettings = {
        profile,
        perturbation,
        gpus,
        ranksPerGpu,
        links,
        deviceLocalCopy: localCopy === "on" ? DEFAULT_DEVICE_LOCAL_COPY : null,
        seeds,
        numBlocks,
        blockSize,
        scheduler: {
          maxNumSeqs: 256,
          maxNumBatchedTokens: 8192,
          maxModelLen,
          enableChunkedPrefill: true,
          stepTargetMs: DEFAULT_STEP_TARGET_MS,
        },
        messageMs,
        sharedGpuPenalty,
        hostOverheadMs,
        ...(sel.maxInFlight !== undefined ? { maxInFlight: sel.maxInFlight } : {}),
        transferMode,
        transferOptions,
        log,
        ...(a["save-requests"]
          ? {
            onRun: (config: string, seed: number, records: readonly RequestRecord[]) =>
              writeRequestLog(dir, scenarioName, config, seed, records),
          }
          : {}),
      };
      const traceProfile = first.requests.every((r) => r.promptTokenIds)
        ? profileTrace(first.requests, blockSize)
        : null;
      const rungs = firstRun.rungs;
      log(
        `\n${first.name}: ${first.description}\n${first.name}: ${first.requests.length} requests, ${numBlocks} blocks of ${blockSize} tokens per rank`,
      );
      const scenario: ScenarioResult = {
        workload: {
          name: scenarioName,
          description: first.description,
          seed: first.seed,
          params: first.params,
          settings: first.settings,
          requests: first.requests.length,
          ...(first.reference ? { reference: first.reference } : {}),
        },
        traceProfile,
        arrival: describeArrival(firstRun.arrival),
        maxInFlight: sel.maxInFlight ?? first.settings.maxInFlight ?? null,
        configurations: [],
        ...(rungs ? { ladder: { rungs, rows: [] } } : {}),
      };
      scenarios.push(scenario);
      for (const name of configNames) {
        const { result, runs } = await simulateConfiguration(name, runFor, settings);
        scenario.configurations.push(result);
        scale.push({ workload: first.name, gpus, load, result });
        if (scenario.ladder) scenario.ladder.rows.push(...rungRows(result, scenario.ladder.rungs));
        allRuns.push(...runs);
        writeArtifacts(results, { dir });
      }
    }
  }
  const written = writeArtifacts(results, { dir });
  const simText = simulationSection(allRuns, profile);
  writeFileSync(join(dir, "simulation.json"), toJson({ runs: allRuns }));
  const summaryPath = join(dir, "summary.md");
  writeFileSync(summaryPath, `${readFileSync(summaryPath, "utf8")}\n${simText}`);
  if (gpuList.length > 1) {
    writeFileSync(join(dir, "scale.md"), `# Simulated scale sweep\n\n${scaleTable(scale)}\n`);
    for (const [name, svg] of Object.entries(scaleCharts(scale))) writeFileSync(join(dir, name), svg);
    log(`\n${scaleTable(scale)}`);
  }
  for (const s of scenarios) log(`\n${scenarioSection(s)}`);
  log(`\n${simText}`);
  log(`wrote ${written.files.length + 1} files to ${dir}`);
  return { results, dir, runs: allRuns };
}

/** "D,O": the shared-GPU penalties of decode-only and other steps, each >= 1. */
function penaltyOption(text: string): { decode: number; other: number } {
  const [d, o] = text.split(",").map((t) => Number(t.trim()));
  if (!(d! >= 1) || !(o! >= 1) || text.split(",").length !== 2) {
    throw new RangeError(`--shared-gpu-penalty takes two numbers >= 1, "decode,other", got ${JSON.stringify(text)}`);
  }
  return { decode: d!, other: o! };
}

const entry: BenchEntry = {
  name: "simulate",
  description:
    "cluster simulator: e2e workloads and configurations on 1-64+ simulated GPUs, production control plane on virtual time, calibrated engine model",
  async run(argv) {
    await runSimulate(argv);
  },
};
export default entry;
