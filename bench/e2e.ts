/**
 * `bun bench e2e`: the policy comparison. Runs a workload (by default the locality sweep at
 * 1x/3x/5x) on every configuration (single GPU; each routing policy with transfers off;
 * transfer with round-robin; full LMPool), several repetitions each on a fresh engine, and
 * writes results.json, summary.md and SVG charts under bench/results/<UTC timestamp>/.
 * `--quick` runs the CPU backend with the tiny model on a scaled-down workload (locality, or the
 * load-skew/memory-skew/mooncake/shared-prefix-ladder forms when named), two repetitions and the
 * five reference configurations, and still writes every artifact. `--arrival` takes burst, trace, a
 * Poisson rate or a ladder of rates ("2,4,8"); under a ladder, summary.md and results.json add one
 * row per configuration and rung (the shared-prefix ladder brings its own rates). The Mooncake
 * trace's window and caps come from their own flags (--first, --start, --duration, --max-input,
 * --max-output, --speedup); requests longer than the served model's context are always skipped.
 * @module
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { buildConfigurations, CONFIGURATION_NAMES, type EngineContext } from "./configurations.ts";
import { describeArrival } from "./driver/arrival.ts";
import { LADDER_WORKLOAD } from "./driver/ladder_arrival.ts";
import { runConfiguration } from "./driver/repetitions.ts";
import type { RequestRecord } from "./driver/request_record.ts";
import { describeGpus, gpusOption, intOption } from "./cli_options.ts";
import type { BenchEntry } from "./entry.ts";
import { readModelConfig, resolveModelDir } from "./model_dir.ts";
import { collectMetadata } from "./report/metadata.ts";
import { type BenchResults, RESULTS_SCHEMA, type ScenarioResult, type TransferLatencyPoint } from "./report/schema.ts";
import { rungRows } from "./report/rung_table.ts";
import { writeRequestLog } from "./report/request_log.ts";
import { scenarioSection } from "./report/summary_md.ts";
import { createResultsDir, writeArtifacts } from "./report/write_artifacts.ts";
import { profileTrace, type TraceProfile } from "./trace_profile.ts";
import { WORKLOAD_NAMES } from "./workloads/registry.ts";
import { jsonObjectOption, selectWorkloads, WORKLOAD_FLAG_OPTIONS } from "./workload_flags.ts";
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

/** The shared-prefix ladder of --quick: 4 groups x 3 users on 16-token blocks, a warm-up pass over the
 * users, then 3 rungs of one request per user at rising rates. */
export const QUICK_SHARED_PREFIX_LADDER = {
  groups: 4,
  users: 3,
  systemTokens: 64,
  questionTokens: 16,
  outputTokens: 4,
  rates: [8, 16, 32],
  requestsPerRung: 12,
  blockSize: 16,
  kvBlocksPerGpu: 256,
  maxTokenId: 4000,
};

const QUICK_OVERRIDES: Readonly<Record<string, Record<string, unknown>>> = {
  locality: QUICK_LOCALITY,
  "load-skew": QUICK_LOAD_SKEW,
  "memory-skew": QUICK_MEMORY_SKEW,
  mooncake: QUICK_MOONCAKE,
  [LADDER_WORKLOAD]: QUICK_SHARED_PREFIX_LADDER,
};

/** The configurations of --quick: the reference's five-way comparison (single GPU, round-robin,
 * routing only, transfer only, full LMPool), to keep the CI form short. */
export const QUICK_CONFIGURATIONS = ["single-gpu", "round-robin", "lmpool-routing", "transfer-rr", "lmpool"];

const HELP = `usage: bun bench e2e [options]
  --quick                 CPU backend, tiny model, scaled-down locality/load-skew/memory-skew/mooncake/
                          shared-prefix-ladder, 2 repetitions
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
  --arrival MODE          burst | trace | requests per second (Poisson) | a ladder of rates, e.g. 2,4,8: rung k's
                          requests arrive as a Poisson process at the k-th rate, one report row per rung
                          (default burst; shared-prefix-ladder: its own rates, which a rate or list replaces)
  --max-in-flight N       in-flight limit (default: the workload's)
  --transfer-mode MODE    auto (cost-gated, default) | force (every candidate plan: checks the mechanisms)
  --transfer-options JSON transfer settings of the transfer configurations, e.g. '{"offloadIntoColderCache":true}'
  --transfer-json PATH    transfer latency to chart: \`bun bench transfer\`'s profile JSON, or points [{pair, blocks, bytes, latencyMs}]
  --save-requests         also write each run's per-request records (JSON lines) under <out>/requests/
  --out DIR               results directory (default bench/results/<UTC timestamp>)`;

async function traceProfileOf(w: Workload, blockSize: number, modelDir: string): Promise<TraceProfile> {
  if (w.requests.every((r) => r.promptTokenIds)) return profileTrace(w.requests, blockSize);
  const { ModelTokenizer } = (await import("../lib/model/tokenizer.ts")) as {
    ModelTokenizer: { fromDir(d: string): { encode(t: string): number[] } };
  };
  const tok = ModelTokenizer.fromDir(modelDir);
  return profileTrace(w.requests, blockSize, (t) => tok.encode(t));
}

/** Runs the e2e comparison with command-line `argv`; returns the results and where they went (null for --help). */
export async function runE2E(
  argv: string[],
  log: (line: string) => void = console.log,
): Promise<{ results: BenchResults; dir: string } | null> {
  const { values: a } = parseArgs({
    args: argv,
    options: {
      ...WORKLOAD_FLAG_OPTIONS,
      quick: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      topology: { type: "string" },
      configs: { type: "string" },
      model: { type: "string" },
      backend: { type: "string" },
      gpus: { type: "string" },
      repetitions: { type: "string" },
      "transfer-json": { type: "string" },
      "transfer-mode": { type: "string" },
      "transfer-options": { type: "string" },
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
  const backend = a.backend ?? (quick ? "cpu" : undefined);
  if (backend !== undefined && backend !== "cpu" && backend !== "cuda") {
    throw new RangeError(`--backend must be cpu or cuda, got ${JSON.stringify(backend)}`);
  }
  const sel = selectWorkloads(a, {
    quickOverrides: quick ? QUICK_OVERRIDES : undefined,
    defaultScales: quick ? "1" : "1,3,5",
  });
  const seed = sel.seed;
  const repetitions = intOption("repetitions", a.repetitions, quick ? 2 : 3);
  const gpus = gpusOption("gpus", a.gpus, 2);
  const transferOptions = jsonObjectOption("transfer-options", a["transfer-options"]);
  // The Mooncake replay skips requests by the served model's context, so it waits for the model.
  const early = sel.specs.map((spec) => (spec.name === "mooncake" ? null : sel.build(spec, {})));
  const configNames = (a.configs ?? (quick ? QUICK_CONFIGURATIONS : CONFIGURATION_NAMES).join(",")).split(",").map((
    s,
  ) => s.trim()).filter(Boolean);
  const unknown = configNames.filter((n) => !(CONFIGURATION_NAMES as readonly string[]).includes(n));
  if (unknown.length) {
    throw new RangeError(
      `unknown configuration ${JSON.stringify(unknown[0])}; known: ${CONFIGURATION_NAMES.join(", ")}`,
    );
  }
  const transferMode = a["transfer-mode"] ?? "auto";
  if (transferMode !== "auto" && transferMode !== "force") {
    throw new RangeError(`--transfer-mode must be auto or force, got ${JSON.stringify(transferMode)}`);
  }
  const maxInFlight = sel.maxInFlight;

  const modelDir = await resolveModelDir(a.model ?? (quick ? "tiny" : "qwen3-0.6b"));
  const model = readModelConfig(modelDir);
  const workloads = sel.specs.map((spec, i) => early[i] ?? sel.build(spec, model));
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
      seeds: {
        workload: seed,
        ...(workloads.some(({ arrival }) => arrival.kind === "poisson" || arrival.kind === "ladder")
          ? { arrival: seed }
          : {}),
      },
      extra: { backend: backend ?? "auto", gpusUsed: new Set(gpus).size, rankDevices: gpus, quick },
    }),
    scenarios,
    ...(transferLatency ? { transferLatency } : {}),
  };
  const dir = a.out ?? createResultsDir();
  let written: { files: string[] } | undefined;
  for (const { workload: w, arrival, rungs } of workloads) {
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
      arrival: describeArrival(arrival),
      maxInFlight: maxInFlight ?? w.settings.maxInFlight ?? null,
      configurations: [],
      ...(rungs ? { ladder: { rungs, rows: [] } } : {}),
    };
    scenarios.push(scenario);
    for (const config of buildConfigurations(configNames, ctx)) {
      const result = await runConfiguration(config, w, {
        repetitions,
        run: { arrival, ...(maxInFlight ? { maxInFlight } : {}) },
        log,
        ...(a["save-requests"]
          ? {
            onRun: (rep: number, records: readonly RequestRecord[]) =>
              writeRequestLog(dir, w.name, config.name, rep, records),
          }
          : {}),
      });
      scenario.configurations.push(result);
      if (scenario.ladder) scenario.ladder.rows.push(...rungRows(result, scenario.ladder.rungs));
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
