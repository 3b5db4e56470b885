/**
 * `bun bench judge`: is lmpool the best routing policy? Runs every workload row of the routing
 * comparison in the cluster simulator on separate GPUs, every configuration, several seeds, with
 * the simulated engines perturbed away from the profile the cost model reads (per-step noise and a
 * fixed prefill/decode bias), and judges lmpool against the best other configuration on each row:
 * throughput >= 0.98x, mean and p99 TTFT <= 1.05x, and at locality 5x throughput >= 2x
 * round-robin's. Writes judge.md (the verdicts) beside each row's simulate results.
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { intOption } from "./cli_options.ts";
import type { BenchEntry } from "./entry.ts";
import { judgeRow, type RowEntry, type RowVerdict, verdictTable } from "./report/policy_verdict.ts";
import type { BenchResults } from "./report/schema.ts";
import { utcStamp } from "./report/write_artifacts.ts";
import { runSimulate } from "./simulate.ts";
import { SHARED_PREFIX_LADDER_DEFAULTS } from "./workloads/shared_prefix_ladder.ts";

/** The perturbation the comparison runs the simulated engines at. */
export const JUDGE_PERTURBATION = "noise=0.15,prefill=0.1,decode=-0.1";
const CANDIDATE = "lmpool";
/** The policies lmpool is compared with (the routing issue's list); lmpool-routing is lmpool without transfers. */
const JUDGED_CONFIGURATIONS = [
  "round-robin",
  "least-loaded",
  "cache-aware",
  "weighted-scorers",
  "session-affinity",
  "lmpool-routing",
  CANDIDATE,
];
const BARS = { throughputRatio: 0.98, ttftRatio: 1.05 } as const;

/** One workload row: its label and the simulate flags that make it at `gpus` GPUs. */
interface JudgeRow {
  label: string;
  /** Judged against round-robin's throughput as well (locality 5x: >= 2x). */
  overRoundRobin?: number;
  args(gpus: number): string[];
}

/** Workload options of the two-GPU workloads, per GPU, so a larger cluster gets as much per GPU. */
const PER_GPU = {
  locality: { numRequests: 96, groups: 8, maxInFlight: 8 },
  loadSkew: { revisits: 96, maxInFlight: 8 },
  memorySkew: { sessions: 3, pressureRequests: 15, reuseRequests: 18, maxInFlight: 8 },
  multiTurn: { sessions: 8 },
};

function scaled(gpus: number, perGpu: Record<string, number>): string[] {
  return gpus === 2 ? [] : ["--per-gpu", JSON.stringify(perGpu)];
}

const ROWS: readonly JudgeRow[] = [
  ...[1, 3, 5].map((s): JudgeRow => ({
    label: `locality ${s}x`,
    ...(s === 5 ? { overRoundRobin: 2 } : {}),
    args: (g) => ["--workload", "locality", "--scales", String(s), ...scaled(g, PER_GPU.locality)],
  })),
  { label: "load-skew", args: (g) => ["--workload", "load-skew", ...scaled(g, PER_GPU.loadSkew)] },
  { label: "memory-skew", args: (g) => ["--workload", "memory-skew", ...scaled(g, PER_GPU.memorySkew)] },
  { label: "multi-turn", args: (g) => ["--workload", "multi-turn", ...scaled(g, PER_GPU.multiTurn)] },
  {
    label: "shared-prefix ladder",
    args: (g) => {
      const k = g / 2;
      const d = SHARED_PREFIX_LADDER_DEFAULTS;
      return g === 2 ? ["--workload", "shared-prefix-ladder"] : [
        "--workload",
        "shared-prefix-ladder",
        "--workload-options",
        JSON.stringify({ groups: d.groups * k, rates: d.rates.map((r) => r * k) }),
      ];
    },
  },
  {
    label: "Mooncake",
    args: (g) =>
      g === 2
        ? ["--workload", "mooncake", "--first", "800", "--max-input", "8192", "--max-output", "128"]
        // The whole hour, at a pace near the cluster's capacity (the trace's own is far below it).
        : ["--workload", "mooncake", "--arrival", "trace", "--speedup-per-gpu", "1", "--max-in-flight", "1000000"],
  },
];

const HELP = `usage: bun bench judge [options]
  --gpus N        simulated GPUs in NVLink pairs (default 2; 8 runs the 8-GPU rows: workloads scaled per GPU,
                  the whole Mooncake hour at 8x its pace)
  --seeds S       seeds per configuration (default 5)
  --rows A,B      only rows whose label contains one of these (default: all)
  --out DIR       results directory (default bench/results/<UTC timestamp>-judge-<N>gpu)`;

/** The rows of one scenario: the whole run, or one per rung of a ladder. */
function rowsOf(label: string, results: BenchResults): { row: string; entries: RowEntry[] }[] {
  return results.scenarios.flatMap((s) => {
    if (!s.ladder) {
      return [{
        row: label,
        entries: s.configurations.map((c) => ({ configuration: c.name, intervals: c.intervals })),
      }];
    }
    return s.ladder.rungs.map((rung) => ({
      row: `${label}, ${rung.phase}`,
      entries: s.ladder!.rows.filter((r) => r.phase === rung.phase).map((r) => ({
        configuration: r.configuration,
        intervals: r.intervals,
      })),
    }));
  });
}

/** Runs the judge with command-line `argv`; returns the verdicts (null for --help). */
export async function runJudge(
  argv: string[],
  log: (line: string) => void = console.log,
): Promise<RowVerdict[] | null> {
  const { values: a } = parseArgs({
    args: argv,
    options: {
      help: { type: "boolean", short: "h" },
      gpus: { type: "string" },
      seeds: { type: "string" },
      rows: { type: "string" },
      out: { type: "string" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (a.help) {
    log(HELP);
    return null;
  }
  const gpus = intOption("gpus", a.gpus, 2, 2);
  if (gpus % 2 !== 0) throw new RangeError(`--gpus must be even (NVLink pairs), got ${gpus}`);
  const seeds = intOption("seeds", a.seeds, 5);
  const wanted = a.rows?.split(",").map((s) => s.trim().toLowerCase()).filter((s) => s.length > 0);
  const rows = ROWS.filter((r) => !wanted || wanted.some((w) => r.label.toLowerCase().includes(w)));
  if (rows.length === 0) throw new RangeError(`--rows ${a.rows} names no row; rows: ${ROWS.map((r) => r.label)}`);
  const out = a.out ?? join("bench", "results", `${utcStamp()}-judge-${gpus}gpu`);
  mkdirSync(out, { recursive: true });
  const verdicts: RowVerdict[] = [];
  const commands: string[] = [];
  for (const row of rows) {
    const dir = join(out, row.label.replace(/[^a-z0-9]+/gi, "-").toLowerCase());
    const args = [
      ...row.args(gpus),
      "--gpus",
      String(gpus),
      "--configs",
      JUDGED_CONFIGURATIONS.join(","),
      "--topology",
      "pairs",
      "--seeds",
      String(seeds),
      "--perturb",
      JUDGE_PERTURBATION,
      "--out",
      dir,
    ];
    commands.push(`bun bench simulate ${args.map((x) => (/^[\w.,=\/-]+$/.test(x) ? x : `'${x}'`)).join(" ")}`);
    log(`judge: ${row.label} at ${gpus} GPUs`);
    const started = performance.now();
    const r = await runSimulate(args, () => {});
    log(`judge: ${row.label} done in ${((performance.now() - started) / 1000).toFixed(0)} s`);
    for (const { row: name, entries } of rowsOf(row.label, r!.results)) {
      const bars = row.overRoundRobin
        ? { ...BARS, overBaseline: { configuration: "round-robin", factor: row.overRoundRobin } }
        : BARS;
      verdicts.push(judgeRow(name, entries, CANDIDATE, bars));
    }
  }
  const table = verdictTable(verdicts, CANDIDATE);
  const passed = verdicts.filter((v) => v.pass).length;
  const text =
    `# Routing judge: ${gpus} simulated GPUs, ${seeds} seeds, engines perturbed (${JUDGE_PERTURBATION})\n\n` +
    `${passed} of ${verdicts.length} rows pass (lmpool throughput >= ${BARS.throughputRatio}x the best other, ` +
    `mean and p99 TTFT <= ${BARS.ttftRatio}x; locality 5x >= 2x round-robin). "tied": within the best other's 95% ` +
    `half-width.\n\n${table}\n\nCommands:\n\n${commands.map((c) => `    ${c}`).join("\n")}\n`;
  writeFileSync(join(out, "judge.md"), text);
  writeFileSync(join(out, "judge.json"), JSON.stringify(verdicts, null, 2));
  log(`\n${text}\nwrote ${join(out, "judge.md")}`);
  return verdicts;
}

const entry: BenchEntry = {
  name: "judge",
  description:
    "routing judge: lmpool against every other policy on each workload row, simulated GPUs with perturbed engines",
  async run(argv) {
    await runJudge(argv);
  },
};
export default entry;
