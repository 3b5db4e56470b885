/**
 * `bun bench e2e`: the policy comparison. Runs a workload (by default the locality sweep at
 * 1x/3x/5x) on every configuration (single GPU; each routing policy with transfers off;
 * transfer with round-robin; full LMPool), several repetitions each on a fresh engine, and
 * writes results.json, summary.md and SVG charts under bench/results/<UTC timestamp>/.
 * `--quick` runs the CPU backend with the tiny model on a scaled-down workload (locality, or the
 * load-skew/memory-skew/mooncake forms when named), two repetitions and the five reference
 * configurations, and still writes every artifact. The Mooncake trace's window and caps come from
 * their own flags (--first, --start, --duration, --max-input, --max-output, --speedup); requests
 * longer than the served model's context are always skipped.
 * @module
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { buildConfigurations, CONFIGURATION_NAMES, type EngineContext } from "./configurations.ts";
import { parseArrival } from "./driver/arrival.ts";
import { runConfiguration } from "./driver/repetitions.ts";
import { describeGpus, gpusOption, intOption, numberOption } from "./cli_options.ts";
import type { BenchEntry } from "./entry.ts";
import { readModelConfig, resolveModelDir } from "./model_dir.ts";
import { collectMetadata } from "./report/metadata.ts";
import { type BenchResults, RESULTS_SCHEMA, type ScenarioResult, type TransferLatencyPoint } from "./report/schema.ts";
import { scenarioSection } from "./report/summary_md.ts";
import { createResultsDir, writeArtifacts } from "./report/write_artifacts.ts";
import { profileTrace, type TraceProfile } from "./trace_profile.ts";
import { buildWorkload, FILE_WORKLOADS, WORKLOAD_NAMES, type WorkloadSpec } from "./workloads/registry.ts";
import type { Workload } from "./workloads/types.ts";
import { parseTransferProfile, profileLatencyPoints, TRANSFER_PROFILE_SCHEMA } from "./transfer_profile.ts";

/** The scaled-down locality workload of --quick: same structure, CPU-sized. */
export const QUICK_LOCALITY = {
  numRequests: 8,
  groups: 2,
  unitTokens: 40,
  headerTokens: [4, 6],
  questionTokens: [2, 4],
  outputTokens: 4,
  maxInFlight: 4,
  blockSize: 16,
  kvBlocksPerGpu: 64,
};

/** The scaled-down load-skew workload of --quick: the same 3 hot prefixes of 36 complete blocks and
 * a partial one, revisited by 63 requests, on 16-token blocks (token ids fit the test models). */
export const QUICK_LOAD_SKEW = {
  revisits: 63,
  prefixTokens: 583,
  blockSize: 16,
  kvBlocksPerGpu: 384,
  maxTokenId: 4000,
};

/** The scaled-down memory-skew workload of --quick: same phases and block counts, 16-token blocks. */
export const QUICK_MEMORY_SKEW = {
  sessionPrefixTokens: 1158,
  anchorTokens: 16,
  coldTokens: [262, 327],
  blockSize: 16,
  kvBlocksPerGpu: 384,
  maxTokenId: 4000,
};

/** The Mooncake window of --quick: the trace's first 20 requests of at most 2,048 input tokens, 8
 * output tokens each, on 16-token blocks (the hash ids' 512-token blocks split evenly). */
export const QUICK_MOONCAKE = {
  first: 20,
  maxInput: 2048,
  maxOutput: 8,
  blockSize: 16,
  kvBlocksPerGpu: 2048,
  maxInFlight: 8,
};

const QUICK_OVERRIDES: Readonly<Record<string, Record<string, unknown>>> = {
  locality: QUICK_LOCALITY,
  "load-skew": QUICK_LOAD_SKEW,
  "memory-skew": QUICK_MEMORY_SKEW,
  mooncake: QUICK_MOONCAKE,
};

/** The Mooncake workload's flags, by the workload option each one sets. */
const MOONCAKE_FLAGS = {
  first: "first",
  start: "start",
  duration: "duration",
  "max-input": "maxInput",
  "max-output": "maxOutput",
  speedup: "speedup",
} as const;

/** The configurations of --quick: the reference's five-way comparison (single GPU, round-robin,
 * routing only, transfer only, full LMPool), to keep the CI form short. */
export const QUICK_CONFIGURATIONS = ["single-gpu", "round-robin", "lmpool-routing", "transfer-rr", "lmpool"];

const HELP = `usage: bun bench e2e [options]
  --quick                 CPU backend, tiny model, scaled-down locality/load-skew/memory-skew/mooncake, 2 repetitions
  --workload A,B          any of ${Object.keys(WORKLOAD_NAMES).join(" | ")} (default locality)
  --scales 1,3,5          locality prefix scales (default 1,3,5)
  --workload-file PATH    trace of --workload jsonl (the default workload when a file is given) or of
                          --workload mooncake (a trace in the Mooncake format instead of the shipped one)
  --first N               mooncake: the first N requests of the window, counted after skips
  --start S, --duration S mooncake: the window in trace seconds (default: the whole trace)
  --max-input L           mooncake: skip requests of more than L input tokens (those longer than the
                          model's context are always skipped; both counts are reported)
  --max-output M          mooncake: cap every request's output at M tokens
  --speedup X             mooncake with --arrival trace: replay the timestamps X times faster (default 1)
  --workload-options JSON generator options over the defaults (and --quick's), e.g. '{"revisits":30}'
  --topology PAIRS        NVLink pairs of the multi-GPU configurations, e.g. 0-1 (default: nvidia-smi)
  --configs a,b           subset of ${CONFIGURATION_NAMES.join(",")} (--quick: ${QUICK_CONFIGURATIONS.join(",")})
  --model NAME|DIR        preset (tiny, qwen3-0.6b, qwen3-1.7b) or model directory (default qwen3-0.6b)
  --backend cpu|cuda      native backend (default: the loader's choice)
  --gpus N|IDS            ranks of the multi-GPU configurations: a count (ranks on devices 0..N-1) or the
                          device of each rank, repeats allowed (0,0 = two ranks on device 0; 3, = one on
                          device 3); single-gpu runs on the first (default 2)
  --repetitions N         complete repetitions per configuration (default 3)
  --seed N                workload seed (default 0)
  --arrival MODE          burst | trace | requests per second (Poisson) (default burst)
  --max-in-flight N       in-flight limit (default: the workload's)
  --transfer-mode MODE    auto (cost-gated, default) | force (every candidate plan: checks the mechanisms)
  --transfer-options JSON transfer settings of the transfer configurations, e.g. '{"offloadIntoColderCache":true}'
  --transfer-json PATH    transfer latency to chart: \`bun bench transfer\`'s profile JSON, or points [{pair, blocks, bytes, latencyMs}]
  --out DIR               results directory (default bench/results/<UTC timestamp>)`;

async function traceProfileOf(w: Workload, blockSize: number, modelDir: string): Promise<TraceProfile> {
  if (w.requests.every((r) => r.promptTokenIds)) return profileTrace(w.requests, blockSize);
  const { ModelTokenizer } = (await import("../lib/model/tokenizer.ts")) as {
    ModelTokenizer: { fromDir(d: string): { encode(t: string): number[] } };
  };
  const tok = ModelTokenizer.fromDir(modelDir);
  return profileTrace(w.requests, blockSize, (t) => tok.encode(t));
}

/** The JSON object of option `--name` (empty when absent); a RangeError naming the option otherwise. */
function jsonObjectOption(name: string, text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new RangeError(`--${name} must be a JSON object, got ${JSON.stringify(text)}: ${(e as Error).message}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new RangeError(`--${name} must be a JSON object, got ${JSON.stringify(text)}`);
  }
  return v as Record<string, unknown>;
}

/** Runs the e2e comparison with command-line `argv`; returns the results and where they went (null for --help). */
export async function runE2E(
  argv: string[],
  log: (line: string) => void = console.log,
): Promise<{ results: BenchResults; dir: string } | null> {
  const { values: a } = parseArgs({
    args: argv,
    options: {
      quick: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      workload: { type: "string" },
      scales: { type: "string" },
      "workload-file": { type: "string" },
      "workload-options": { type: "string" },
      first: { type: "string" },
      start: { type: "string" },
      duration: { type: "string" },
      "max-input": { type: "string" },
      "max-output": { type: "string" },
      speedup: { type: "string" },
      topology: { type: "string" },
      configs: { type: "string" },
      model: { type: "string" },
      backend: { type: "string" },
      gpus: { type: "string" },
      repetitions: { type: "string" },
      seed: { type: "string" },
      arrival: { type: "string" },
      "max-in-flight": { type: "string" },
      "transfer-json": { type: "string" },
      "transfer-mode": { type: "string" },
      "transfer-options": { type: "string" },
      out: { type: "string" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (a.help) {
    log(HELP);
    return null;
  }
  const quick = a.quick ?? false;
  const backend = a.backend ?? (quick ? "cpu" : undefined);
  if (backend !== undefined && backend !== "cpu" && backend !== "cuda") {
    throw new RangeError(`--backend must be cpu or cuda, got ${JSON.stringify(backend)}`);
  }
  const seed = a.seed === undefined ? 0 : Number(a.seed);
  if (!Number.isSafeInteger(seed)) throw new RangeError(`--seed must be an integer, got ${JSON.stringify(a.seed)}`);
  const repetitions = intOption("repetitions", a.repetitions, quick ? 2 : 3);
  const gpus = gpusOption("gpus", a.gpus, 2);
  const scales = (a.scales ?? (quick ? "1" : "1,3,5")).split(",").map((s) => intOption("scales", s.trim(), 1));
  const extra = jsonObjectOption("workload-options", a["workload-options"]);
  const transferOptions = jsonObjectOption("transfer-options", a["transfer-options"]);
  const overridesOf = (name: string) => ({ ...(quick ? QUICK_OVERRIDES[name] : {}), ...extra });
  // A trace file alone means the jsonl workload; with no jsonl among the named ones, the file would go unread.
  const workloadNames = (a.workload ?? (a["workload-file"] !== undefined ? "jsonl" : "locality")).split(",").map((s) =>
    s.trim()
  );
  if (a.scales !== undefined && !workloadNames.includes("locality")) {
    throw new RangeError(
      `--scales is read by --workload locality only, got --workload ${JSON.stringify(a.workload ?? "jsonl")}`,
    );
  }
  const fileReaders = workloadNames.filter((n) => FILE_WORKLOADS.includes(n));
  if (a["workload-file"] !== undefined && fileReaders.length !== 1) {
    throw new RangeError(
      `--workload-file is read by exactly one of --workload ${FILE_WORKLOADS.join(" or ")}, got --workload ${
        JSON.stringify(a.workload)
      }`,
    );
  }
  const mooncakeFlags = mooncakeFlagOptions(a, extra);
  if (Object.keys(mooncakeFlags).length > 0 && !workloadNames.includes("mooncake")) {
    const flag = Object.keys(MOONCAKE_FLAGS).find((f) => a[f as keyof typeof MOONCAKE_FLAGS] !== undefined);
    throw new RangeError(
      `--${flag} is read by --workload mooncake only, got --workload ${JSON.stringify(a.workload ?? "locality")}`,
    );
  }
  if ((a.speedup !== undefined || "speedup" in extra) && a.arrival !== "trace") {
    throw new RangeError(
      `--speedup scales the trace's arrival times and needs --arrival trace, got --arrival ${
        JSON.stringify(a.arrival ?? "burst")
      }`,
    );
  }
  const specs: WorkloadSpec[] = workloadNames.flatMap((name): WorkloadSpec[] =>
    name === "locality" ? scales.map((scale) => ({ name, scale, seed, overrides: overridesOf(name) })) : [{
      name,
      seed,
      overrides: name === "mooncake" ? { ...overridesOf(name), ...mooncakeFlags } : overridesOf(name),
      ...(name === fileReaders[0] && a["workload-file"] !== undefined ? { path: a["workload-file"] } : {}),
    }]
  );
  // The Mooncake replay skips requests by the served model's context, so it waits for the model.
  const early = specs.map((spec) => (spec.name === "mooncake" ? null : buildWorkload(spec)));
  const configNames = (a.configs ?? (quick ? QUICK_CONFIGURATIONS : CONFIGURATION_NAMES).join(",")).split(",").map((
    s,
  ) => s.trim()).filter(Boolean);
  const unknown = configNames.filter((n) => !(CONFIGURATION_NAMES as readonly string[]).includes(n));
  if (unknown.length) {
    throw new RangeError(
      `unknown configuration ${JSON.stringify(unknown[0])}; known: ${CONFIGURATION_NAMES.join(", ")}`,
    );
  }
  const arrival = parseArrival(a.arrival ?? "burst", seed);
  const transferMode = a["transfer-mode"] ?? "auto";
  if (transferMode !== "auto" && transferMode !== "force") {
    throw new RangeError(`--transfer-mode must be auto or force, got ${JSON.stringify(transferMode)}`);
  }
  const maxInFlight = a["max-in-flight"] === undefined ? undefined : intOption("max-in-flight", a["max-in-flight"], 1);

  const modelDir = await resolveModelDir(a.model ?? (quick ? "tiny" : "qwen3-0.6b"));
  const model = readModelConfig(modelDir);
  const workloads = specs.map((spec, i) => early[i] ?? buildWorkload(withModelLimits(spec, model)));
  log(
    `e2e: model ${modelDir}, backend ${backend ?? "auto"}, ${
      describeGpus(gpus)
    }, ${repetitions} repetitions, configurations ${configNames.join(", ")}`,
  );
  const scenarios: ScenarioResult[] = [];
  const transferLatency = a["transfer-json"] ? readTransferLatency(a["transfer-json"]) : undefined;
  const results: BenchResults = {
    schema: RESULTS_SCHEMA,
    entry: "e2e",
    metadata: collectMetadata({
      command: ["bun", "bench", "e2e", ...argv],
      model,
      seeds: { workload: seed, ...(arrival.kind === "poisson" ? { arrival: arrival.seed } : {}) },
      extra: { backend: backend ?? "auto", gpusUsed: new Set(gpus).size, rankDevices: gpus, quick },
    }),
    scenarios,
    ...(transferLatency ? { transferLatency } : {}),
  };
  const dir = a.out ?? createResultsDir();
  let written: { files: string[] } | undefined;
  for (const w of workloads) {
    const blockSize = w.settings.blockSize ?? 256;
    const ctx: EngineContext = {
      modelDir,
      gpus,
      blockSize,
      transferMode,
      transferOptions,
      ...(backend ? { backend } : {}),
      ...(a.topology ? { topology: a.topology } : {}),
      ...(w.settings.kvBlocksPerGpu ? { kvBlocksPerGpu: w.settings.kvBlocksPerGpu } : {}),
    };
    const traceProfile = await traceProfileOf(w, blockSize, modelDir);
    log(
      `\n${w.name}: ${w.description}\n${w.name}: ${w.requests.length} requests, trace request share ${
        (traceProfile.requestShare * 100).toFixed(2)
      }%, token share ${(traceProfile.tokenShare * 100).toFixed(2)}%`,
    );
    const scenario: ScenarioResult = {
      workload: {
        name: w.name,
        description: w.description,
        seed: w.seed,
        params: w.params,
        settings: w.settings,
        requests: w.requests.length,
        ...(w.reference ? { reference: w.reference } : {}),
      },
      traceProfile,
      arrival: arrival.kind === "poisson" ? `poisson ${arrival.rate} req/s` : arrival.kind,
      maxInFlight: maxInFlight ?? w.settings.maxInFlight ?? null,
      configurations: [],
    };
    scenarios.push(scenario);
    for (const config of buildConfigurations(configNames, ctx)) {
      scenario.configurations.push(
        await runConfiguration(config, w, {
          repetitions,
          run: { arrival, ...(maxInFlight ? { maxInFlight } : {}) },
          log,
        }),
      );
      // Rewrite the artifacts after every configuration: an interrupted sweep keeps what it measured.
      written = writeArtifacts(results, { dir });
    }
  }
  for (const s of scenarios) log(`\n${scenarioSection(s)}`);
  log(`\nwrote ${written?.files.length ?? 0} files to ${dir}`);
  return { results, dir };
}

const entry: BenchEntry = {
  name: "e2e",
  description:
    "policy comparison (single GPU, routing policies, transfer, LMPool) on locality/skew workloads, 95% CIs, JSON+markdown+SVG",
  async run(argv) {
    await runE2E(argv);
  },
};
export default entry;

/** The Mooncake options its flags set; a RangeError names a bad flag or one --workload-options also sets. */
function mooncakeFlagOptions(
  a: Partial<Record<keyof typeof MOONCAKE_FLAGS, string>>,
  extra: Record<string, unknown>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [flag, option] of Object.entries(MOONCAKE_FLAGS)) {
    const text = a[flag as keyof typeof MOONCAKE_FLAGS];
    if (text === undefined) continue;
    if (option in extra) {
      throw new RangeError(`--${flag} and --workload-options' ${option} set the same option; give one of them`);
    }
    const isCount = flag === "first" || flag === "max-input" || flag === "max-output";
    out[option] = isCount ? intOption(flag, text, 1) : numberOption(flag, text, 0, flag !== "start") as number;
  }
  return out;
}

/** `spec` with the served model's context and vocabulary, which a workload option may narrow but not widen. */
function withModelLimits(spec: WorkloadSpec, model: Record<string, unknown>): WorkloadSpec {
  const limits: Record<string, number> = {
    maxModelLen: model.max_position_embeddings as number,
    vocabSize: model.vocab_size as number,
  };
  const overrides = { ...spec.overrides };
  for (const [key, limit] of Object.entries(limits)) {
    const given = overrides[key];
    if (given !== undefined && !(typeof given === "number" && given <= limit)) {
      throw new RangeError(`--workload-options' ${key} must be at most the model's ${limit}, got ${String(given)}`);
    }
    overrides[key] ??= limit;
  }
  return { ...spec, overrides };
}

/** Transfer latency points from the transfer bench's profile (p95 per size) or a plain point list. */
function readTransferLatency(path: string): TransferLatencyPoint[] {
  const json = JSON.parse(readFileSync(path, "utf8")) as unknown;
  if ((json as { schema?: unknown }).schema === TRANSFER_PROFILE_SCHEMA) {
    return profileLatencyPoints(parseTransferProfile(json));
  }
  if (!Array.isArray(json)) {
    throw new TypeError(`--transfer-json ${path}: expected a transfer profile or an array of points`);
  }
  return json as TransferLatencyPoint[];
}
