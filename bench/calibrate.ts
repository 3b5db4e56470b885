/**
 * `bun bench calibrate`: fits the engine model the cluster simulator runs on (bench/calibration/
 * engine_profile.ts) and writes an engine profile. It runs the native step sweeps (decode over
 * batch x context, prefill chunks behind cached prefixes, mixed steps; see `bun bench native_step
 * --sweep`), measures the per-step host overhead through the real in-process engine on the same
 * backend (or takes `--host-overhead-ms`), fits the model by non-negative least squares and prints
 * every point measured vs predicted with its error.
 *
 *   bun bench calibrate                        Qwen3-0.6B shape, default backend (an H200: under a minute of sweep)
 *   bun bench calibrate --model DIR|PRESET      another model's shape (random weights in the sweep)
 *   bun bench calibrate --from sweep.json       refit saved points (no device needed)
 *   bun bench calibrate --quick                 tiny model on the CPU backend, seconds
 *
 * The profile goes to `--out FILE` (default bench/results/<UTC timestamp>/engine-profile.json, with
 * the sweep beside it as engine-profile.sweep.json). Transfer figures are the defaults measured earlier on 2 x
 * H200 (bench/calibration/transfer_defaults.ts), said so in the profile's `transfer.source`.
 * @module
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import type { BackendKind } from "../ffi/loader.ts";
import { native as sharedNative, type NativeModelConfig } from "../ffi/native.ts";
import { parseModelSpec, readModelSpec } from "../lib/model/config.ts";
import { isPresetName, presetConfig } from "../lib/model/presets.ts";
import { fitEngineModel } from "./calibration/engine_fit.ts";
import { defaultTransfer, type EngineProfile, parseEngineProfile } from "./calibration/engine_profile.ts";
import { formatFitTable, formatProfileSummary } from "./calibration/fit_table.ts";
import { FULL_HOST_WORKLOAD, measureHostOverhead, QUICK_HOST_WORKLOAD } from "./calibration/host_overhead.ts";
import { parseSweepFile, type SweepFile } from "./calibration/sweep_file.ts";
import { FULL_SWEEP_GRID, parseSweepKinds, QUICK_SWEEP_GRID, SWEEP_KINDS } from "./calibration/sweep_grid.ts";
import { FULL_SWEEP_TIMING, QUICK_SWEEP_TIMING, runSweep } from "./calibration/sweep_run.ts";
import { formatSweepTable } from "./calibration/sweep_table.ts";
import { intOption, numberOption } from "./cli_options.ts";
import type { BenchEntry } from "./entry.ts";
import { resolveModelDir } from "./model_dir.ts";
import { collectMetadata } from "./report/metadata.ts";
import { createResultsDir, toJson } from "./report/write_artifacts.ts";

const USAGE = `usage: bun bench calibrate [--quick] [--model DIR|PRESET] [--backend cpu|cuda] [--block-size N]
  [--sweep decode,prefill,mixed] [--from sweep.json] [--host-overhead-ms MS] [--source TEXT] [--out profile.json]`;

/** Options after validation. */
interface CalibrateOptions {
  quick: boolean;
  model: string;
  backend: BackendKind | undefined;
  blockSize: number | undefined;
  kinds: (typeof SWEEP_KINDS)[number][];
  from: string | undefined;
  hostOverheadMs: number | undefined;
  source: string | undefined;
  out: string | undefined;
}

function parseOptions(argv: string[]): CalibrateOptions | null {
  const { values: v } = parseArgs({
    args: argv,
    strict: true,
    options: {
      quick: { type: "boolean" },
      model: { type: "string" },
      backend: { type: "string" },
      "block-size": { type: "string" },
      sweep: { type: "string" },
      from: { type: "string" },
      "host-overhead-ms": { type: "string" },
      source: { type: "string" },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (v.help) {
    console.log(USAGE);
    return null;
  }
  const quick = v.quick ?? false;
  if (v.backend !== undefined && v.backend !== "cpu" && v.backend !== "cuda") {
    throw new RangeError(`--backend must be cpu or cuda, got ${JSON.stringify(v.backend)}`);
  }
  if (quick && v.backend === "cuda") throw new RangeError("--quick runs on the CPU backend; leave out --backend cuda");
  if (v.from !== undefined) {
    for (const flag of ["model", "backend", "block-size", "sweep"] as const) {
      if (v[flag] !== undefined) throw new RangeError(`--${flag} does not apply to --from (the sweep file fixes it)`);
    }
  }
  if (v.source !== undefined && v.source.trim() === "") throw new RangeError("--source must not be empty");
  return {
    quick,
    model: v.model ?? (quick ? "tiny" : "qwen3-0.6b"),
    backend: quick ? "cpu" : (v.backend as BackendKind | undefined),
    blockSize: v["block-size"] === undefined ? undefined : intOption("block-size", v["block-size"], 0),
    kinds: v.sweep === undefined ? [...SWEEP_KINDS] : parseSweepKinds(v.sweep),
    from: v.from,
    hostOverheadMs: numberOption("host-overhead-ms", v["host-overhead-ms"], 0),
    source: v.source,
    out: v.out,
  };
}

/** The native shape of `model` (a preset name or a Hugging Face directory). */
function modelShape(model: string): NativeModelConfig {
  return isPresetName(model)
    ? parseModelSpec(presetConfig(model), { name: model }).native
    : readModelSpec(model).native;
}

/** Runs the sweeps (and the host measurement unless set) on this machine. */
async function measure(o: CalibrateOptions, argv: string[]): Promise<SweepFile> {
  const native = sharedNative(o.backend);
  const blockSize = o.blockSize ?? (native.backend === "cuda" ? 256 : 16);
  const config = modelShape(o.model);
  const metadata = collectMetadata({ command: ["bench", "calibrate", ...argv], model: { name: o.model, blockSize } });
  console.log(`calibrate: sweeping ${o.model} on the ${native.backend} backend (${native.path})`);
  const sweep = runSweep({
    native,
    config,
    modelName: o.model,
    blockSize,
    grid: o.quick ? QUICK_SWEEP_GRID : FULL_SWEEP_GRID,
    kinds: o.kinds,
    timing: o.quick ? QUICK_SWEEP_TIMING : FULL_SWEEP_TIMING,
    device: native.backend === "cuda" ? (metadata.gpus[0]?.name ?? "cuda") : "cpu",
    copy: o.quick ? { bytes: 2 ** 25, iters: 5 } : { bytes: 2 ** 31, iters: 10 },
  });
  console.log(formatSweepTable(sweep));
  if (o.hostOverheadMs === undefined) {
    const t0 = performance.now();
    sweep.hostOverhead = await measureHostOverhead({
      modelDir: await resolveModelDir(o.model),
      backend: native.backend,
      blockSize,
      workload: o.quick ? QUICK_HOST_WORKLOAD : FULL_HOST_WORKLOAD,
      sweepPoints: sweep.points,
    });
    const h = sweep.hostOverhead;
    console.log(
      `host overhead: ${h.hostOverheadMs.toFixed(3)} ms per step = ${h.outsideNativeMsPerStep.toFixed(3)} ms outside ` +
        `the native call + ${h.nativeCallOverheadMs.toFixed(3)} ms of call over device time ` +
        `(${h.steps} steps of ${h.requests} requests, ${((performance.now() - t0) / 1e3).toFixed(1)} s)`,
    );
  }
  return { ...sweep, metadata };
}

/** Reads a saved sweep. */
function readSweep(path: string): SweepFile {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new RangeError(`--from ${path}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  return parseSweepFile(json, path);
}

/** The profile of a fitted sweep. */
function makeProfile(sweep: SweepFile, o: CalibrateOptions): EngineProfile {
  const fit = fitEngineModel(sweep.points.map((p) => ({ label: p.label, kind: p.kind, work: p.work, ms: p.ms })));
  let hostOverheadMs: number, hostOverheadSource: string;
  if (o.hostOverheadMs !== undefined) {
    hostOverheadMs = o.hostOverheadMs;
    hostOverheadSource = "set by --host-overhead-ms";
  } else if (sweep.hostOverhead) {
    hostOverheadMs = sweep.hostOverhead.hostOverheadMs;
    hostOverheadSource =
      `measured through the in-process engine (LLM) on ${sweep.device}: ${sweep.hostOverhead.steps} steps`;
  } else {
    throw new RangeError(
      `${o.from}: the sweep file has no host overhead measurement; pass --host-overhead-ms MS (e.g. 0.3), or run calibrate without --from`,
    );
  }
  const meta = sweep.metadata as { gitRevision?: string | null } | undefined;
  const what = o.from ? `refit by bun bench calibrate --from ${o.from}` : "measured by bun bench calibrate";
  const source = o.source ??
    `${what}: ${sweep.points.length} steps on ${sweep.device} (${sweep.backend}), ${sweep.createdAt}, git ${
      meta?.gitRevision ?? "unknown"
    }`;
  const profile: EngineProfile = {
    schema: "lmpool-engine-profile/1",
    source,
    createdAt: new Date().toISOString(),
    device: sweep.device,
    backend: sweep.backend,
    model: sweep.model,
    coefficients: fit.coefficients,
    hostOverheadMs,
    hostOverheadSource,
    fit: {
      meanAbsErrorPct: fit.meanAbsErrorPct,
      maxAbsErrorPct: fit.maxAbsErrorPct,
      range: fit.range,
      points: fit.points,
    },
    transfer: defaultTransfer(),
  };
  // What is written must load: the same check the simulator runs.
  return parseEngineProfile(JSON.parse(JSON.stringify(profile)), "the fitted profile");
}

/** Runs calibrate; returns the path of the profile written (for tests). */
export async function calibrate(argv: string[]): Promise<string | null> {
  const o = parseOptions(argv);
  if (o === null) return null;
  const sweep = o.from ? readSweep(o.from) : await measure(o, argv);
  const profile = makeProfile(sweep, o);
  console.log(`\nengine model fitted to ${profile.fit.points.length} steps (device ms; host overhead apart):`);
  console.log(formatFitTable({ ...profile.fit, coefficients: profile.coefficients }));
  console.log(formatProfileSummary(profile));
  const out = o.out ?? join(createResultsDir(), "engine-profile.json");
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, toJson(profile));
  console.log(`\nwrote ${out}`);
  if (!o.from) {
    const sweepPath = out.replace(/(\.json)?$/, ".sweep.json");
    writeFileSync(sweepPath, toJson(sweep));
    console.log(`wrote ${sweepPath} (refit with --from)`);
  }
  return out;
}

const entry: BenchEntry = {
  name: "calibrate",
  description:
    "fits the simulator's engine model to native step sweeps and writes an engine profile (measured vs predicted)",
  async run(argv: string[]): Promise<void> {
    await calibrate(argv);
  },
};
export default entry;
