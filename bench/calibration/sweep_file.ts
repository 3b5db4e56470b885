/**
 * The sweep file: every step shape `bun bench native_step --sweep` (or `bun bench calibrate`)
 * measured, with its StepWork and its median device time, so `bun bench calibrate --from` can
 * refit it later (another model formula, another host overhead) without a GPU.
 * @module
 */
import { z } from "zod";
import type { ProfileModel, StepWork } from "./engine_profile.ts";
import { parseJsonField } from "./json_fields.ts";
import type { SkippedPoint, SweepKind, SweepPointSpec } from "./sweep_grid.ts";

/** Schema id of a sweep file. */
export const SWEEP_FILE_SCHEMA = "lmpool-native-step-sweep/1";

/** How long each point of a kind is run. */
export interface SweepIterations {
  /** Untimed steps before timing. */
  warmupSteps: number;
  /** And untimed steps for at least this long (clocks settle after a change of load). */
  warmupMs: number;
  /** Timed steps; a point's time is their median. */
  timedSteps: number;
}

/** Iterations per kind. */
export type SweepTiming = Record<SweepKind, SweepIterations>;

/** One measured point. */
export interface SweepPoint extends SweepPointSpec {
  label: string;
  /** Median device time of the timed steps, ms (CUDA events; compute time on the CPU backend). */
  ms: number;
  /** Median wall time of the native call, ms (device time plus launch and synchronisation). */
  wallMs: number;
  samples: number;
}

/** The per-step host time measured through the in-process engine (see host_overhead.ts). */
export interface HostOverheadMeasurement {
  hostOverheadMs: number;
  /** Engine steps, and the wall and native-call time they took. */
  steps: number;
  wallMs: number;
  nativeMs: number;
  /** Host time per step outside the native call (scheduling, batch building, loop), ms. */
  outsideNativeMsPerStep: number;
  /** Native call time beyond device time per step, ms (median over the sweep's points). */
  nativeCallOverheadMs: number;
  requests: number;
  promptTokens: number;
  outputTokens: number;
}

/** A whole sweep. */
export interface SweepFile {
  schema: typeof SWEEP_FILE_SCHEMA;
  createdAt: string;
  backend: "cuda" | "cpu";
  device: string;
  model: ProfileModel;
  weightBytes: number;
  /** Measured device copy bandwidth, bytes/s (read + write): the ceiling decode approaches. */
  copyBytesPerS: number;
  kvCapacityTokens: number;
  iterations: SweepTiming;
  /** Wall time of the sweep itself (model build and cache allocation excluded), s. */
  wallSeconds: number;
  points: SweepPoint[];
  skipped: SkippedPoint[];
  hostOverhead?: HostOverheadMeasurement;
  metadata?: unknown;
}

const nonNegative = z.number().finite().nonnegative();
const kind = z.enum(["decode", "mixed", "prefill"]);
const iterations = z.strictObject({
  warmupSteps: nonNegative,
  warmupMs: nonNegative,
  timedSteps: z.number().int().positive(),
});
const work: z.ZodType<StepWork> = z.strictObject({
  decodeSeqs: nonNegative,
  decodeContext: nonNegative,
  prefillSeqs: nonNegative,
  prefillTokens: nonNegative,
  prefillPairs: nonNegative,
});

const sweepFileSchema = z.strictObject({
  schema: z.literal(SWEEP_FILE_SCHEMA),
  createdAt: z.string(),
  backend: z.enum(["cuda", "cpu"]),
  device: z.string(),
  model: z.strictObject({
    name: z.string(),
    numLayers: z.number().int().positive(),
    hiddenSize: z.number().int().positive(),
    numKvHeads: z.number().int().positive(),
    headDim: z.number().int().positive(),
    kvBytesPerToken: z.number().positive(),
    blockSize: z.number().int().positive(),
    maxPosition: z.number().int().positive(),
  }),
  weightBytes: nonNegative,
  copyBytesPerS: nonNegative,
  kvCapacityTokens: nonNegative,
  iterations: z.strictObject({ decode: iterations, mixed: iterations, prefill: iterations }),
  wallSeconds: nonNegative,
  points: z.array(z.strictObject({
    kind,
    label: z.string(),
    batch: nonNegative,
    context: nonNegative,
    seqs: nonNegative,
    chunk: nonNegative,
    cachedPct: nonNegative,
    prefix: nonNegative,
    work,
    ms: z.number().finite().positive(),
    wallMs: nonNegative,
    samples: z.number().int().positive(),
  })).min(1),
  skipped: z.array(z.strictObject({ kind, label: z.string(), why: z.string() })),
  hostOverhead: z.strictObject({
    hostOverheadMs: nonNegative,
    steps: z.number().int().positive(),
    wallMs: nonNegative,
    nativeMs: nonNegative,
    outsideNativeMsPerStep: nonNegative,
    nativeCallOverheadMs: nonNegative,
    requests: z.number().int().positive(),
    promptTokens: nonNegative,
    outputTokens: nonNegative,
  }).optional(),
  metadata: z.unknown().optional(),
});

/** Validates a parsed sweep file; a RangeError names the field, its value and `source`. */
export function parseSweepFile(json: unknown, source: string): SweepFile {
  return parseJsonField(sweepFileSchema, json, source) as SweepFile;
}
