/**
 * The engine profile: what one GPU engine's step costs, as `bun bench calibrate` fits it and the
 * cluster simulator reads it. A step's device time is
 *
 *   fixedMs                                   launch, weight read floor, sampling setup
 *   + decodeSeqMs  * decodeSeqs               per decoding sequence (metadata, sampling row)
 *   + prefillSeqMs * prefillSeqs              per prefilling sequence (tiles, sampling row)
 *   + tokenMs * max(0, tokens - kneeTokens)   GEMMs once compute-bound; tokens = decodeSeqs + prefillTokens
 *   + kvReadMs * decodeContext                decode attention reading the KV of every context token
 *   + pairMs * prefillPairs                   prefill attention over (query, key) pairs
 *
 * Below `kneeTokens` a step's GEMMs are bound by reading the weights once, a cost every step pays
 * and so part of fixedMs; above it they are bound by arithmetic, linear in tokens (the roofline's
 * max(weights read, FLOPs) written so that each piece is linear). Every coefficient is >= 0, so the
 * cost never falls when a step does more work of any kind.
 *
 * Extrapolation: each term is linear in its feature, so outside the measured points the model
 * continues the measured slopes. That is safe where the hardware is linear too: more decode
 * context reads proportionally more KV (and a cache never holds more than the sweep filled), longer
 * prefill chunks past the knee are compute-bound GEMMs, attention pairs cost the same FLOPs at any
 * position. It is not safe for decode batches above the largest measured one (past the engine's
 * CUDA graphs steps launch kernel by kernel, which a fixed cost measured with graphs understates),
 * nor for a GPU, model or block size other than the profile's: `fit.range` records the measured
 * extent, and the simulator should flag steps beyond it.
 *
 * A worker's step takes totalMs of device time plus `hostOverheadMs` of host time (scheduling,
 * batch building, reports) that the device does not overlap.
 * @module
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { parseJsonField } from "./json_fields.ts";
import { H200_NVLINK_TRANSFER, type TransferDefaults } from "./transfer_defaults.ts";
import type { StepWork } from "../../lib/local/step_work.ts";

export { dispatchToPublishMs, H200_NVLINK_TRANSFER, type TransferDefaults, transferMs } from "./transfer_defaults.ts";

/** The work of one engine step (the workers' own description, which the sweeps and the simulator use). */
export type { StepWork };

/** Step time split in parts (the simulator perturbs prefill and decode parts separately), device ms. */
export interface StepCost {
  fixedMs: number;
  decodeMs: number;
  prefillMs: number;
  /** fixedMs + decodeMs + prefillMs (host overhead not included). */
  totalMs: number;
}

/** The fitted coefficients of the step model (see the module doc). */
export interface EngineCoefficients {
  fixedMs: number;
  decodeSeqMs: number;
  prefillSeqMs: number;
  tokenMs: number;
  kneeTokens: number;
  kvReadMs: number;
  pairMs: number;
}

/** The largest step of each kind the fit saw: the model is measured up to here. */
export interface MeasuredRange {
  maxDecodeSeqs: number;
  maxDecodeContext: number;
  maxPrefillTokens: number;
  maxPrefillPairs: number;
  maxStepTokens: number;
}

/** One measured step beside the model's prediction. */
export interface FitPoint {
  /** What was measured, e.g. "decode 64 x 4096" or "prefill 2048 @ 50%". */
  label: string;
  kind: "decode" | "prefill" | "mixed";
  work: StepWork;
  measuredMs: number;
  predictedMs: number;
}

/** The model's shape facts the profile holds for (a profile is only valid for its model and block size). */
export interface ProfileModel {
  name: string;
  numLayers: number;
  hiddenSize: number;
  numKvHeads: number;
  headDim: number;
  /** KV bytes of one token (all layers, K and V). */
  kvBytesPerToken: number;
  blockSize: number;
  maxPosition: number;
}

/** A calibrated engine. */
export interface EngineProfile {
  schema: "lmpool-engine-profile/1";
  /** Where the numbers come from (measured run, or provisional figures). */
  source: string;
  createdAt: string;
  /** The device the sweeps ran on, e.g. "NVIDIA H200" or "cpu". */
  device: string;
  backend: "cuda" | "cpu";
  model: ProfileModel;
  coefficients: EngineCoefficients;
  /** Host time a worker adds to each step beyond the native step, ms. */
  hostOverheadMs: number;
  /** How hostOverheadMs was obtained (measured through the in-process engine, or set). */
  hostOverheadSource: string;
  fit: {
    meanAbsErrorPct: number;
    maxAbsErrorPct: number;
    range: MeasuredRange;
    points: FitPoint[];
  };
  transfer: TransferDefaults;
}

/** The checked-in profile: one H200 with Qwen3-0.6B, 256-token blocks. */
export const DEFAULT_ENGINE_PROFILE_PATH: string = fileURLToPath(
  new URL("./profiles/h200-qwen3-0.6b.json", import.meta.url),
);

const STEP_WORK_FIELDS = ["decodeSeqs", "decodeContext", "prefillSeqs", "prefillTokens", "prefillPairs"] as const;

/** Throws a RangeError naming the first StepWork field that is not a finite number >= 0. */
export function checkStepWork(w: StepWork): void {
  for (const k of STEP_WORK_FIELDS) {
    const v = w[k];
    if (!(typeof v === "number" && Number.isFinite(v) && v >= 0)) {
      throw new RangeError(`StepWork.${k} must be a finite number >= 0, got ${JSON.stringify(v)}`);
    }
  }
}

/** Device time of a step of work `w` on the engine of profile `p`, in parts. An empty step costs 0. */
export function stepCost(p: EngineProfile, w: StepWork): StepCost {
  return stepCostOf(p.coefficients, w);
}

/** {@link stepCost} from the coefficients alone (the fit uses it before a profile exists). */
export function stepCostOf(c: EngineCoefficients, w: StepWork): StepCost {
  checkStepWork(w);
  const tokens = w.decodeSeqs + w.prefillTokens;
  if (tokens === 0 && w.prefillSeqs === 0) return { fixedMs: 0, decodeMs: 0, prefillMs: 0, totalMs: 0 };
  // The compute-bound GEMM time is shared by the step's tokens, decode and prefill alike.
  const gemmPerToken = tokens > 0 ? (c.tokenMs * Math.max(0, tokens - c.kneeTokens)) / tokens : 0;
  const decodeMs = c.decodeSeqMs * w.decodeSeqs + c.kvReadMs * w.decodeContext + gemmPerToken * w.decodeSeqs;
  const prefillMs = c.prefillSeqMs * w.prefillSeqs + c.pairMs * w.prefillPairs + gemmPerToken * w.prefillTokens;
  return { fixedMs: c.fixedMs, decodeMs, prefillMs, totalMs: c.fixedMs + decodeMs + prefillMs };
}

const nonNegative = z.number().finite().nonnegative();
const workSchema = z.strictObject({
  decodeSeqs: nonNegative,
  decodeContext: nonNegative,
  prefillSeqs: nonNegative,
  prefillTokens: nonNegative,
  prefillPairs: nonNegative,
});
const positiveInt = z.number().int().positive();

/** The schema of a profile file: every field required, none unknown. */
export const engineProfileSchema = z.strictObject({
  schema: z.literal("lmpool-engine-profile/1"),
  source: z.string().min(1),
  createdAt: z.string(),
  device: z.string(),
  backend: z.enum(["cuda", "cpu"]),
  model: z.strictObject({
    name: z.string(),
    numLayers: positiveInt,
    hiddenSize: positiveInt,
    numKvHeads: positiveInt,
    headDim: positiveInt,
    kvBytesPerToken: z.number().positive(),
    blockSize: positiveInt,
    maxPosition: positiveInt,
  }),
  coefficients: z.strictObject({
    fixedMs: nonNegative,
    decodeSeqMs: nonNegative,
    prefillSeqMs: nonNegative,
    tokenMs: nonNegative,
    kneeTokens: nonNegative,
    kvReadMs: nonNegative,
    pairMs: nonNegative,
  }),
  hostOverheadMs: nonNegative,
  hostOverheadSource: z.string().min(1),
  fit: z.strictObject({
    meanAbsErrorPct: nonNegative,
    maxAbsErrorPct: nonNegative,
    range: z.strictObject({
      maxDecodeSeqs: nonNegative,
      maxDecodeContext: nonNegative,
      maxPrefillTokens: nonNegative,
      maxPrefillPairs: nonNegative,
      maxStepTokens: nonNegative,
    }),
    points: z.array(z.strictObject({
      label: z.string(),
      kind: z.enum(["decode", "prefill", "mixed"]),
      work: workSchema,
      measuredMs: nonNegative,
      predictedMs: nonNegative,
    })),
  }),
  transfer: z.strictObject({
    source: z.string().min(1),
    blockBytes: z.number().positive(),
    oneBlockMs: z.number().positive(),
    manyBlocks: z.number().int().min(2),
    manyBlocksGBps: z.number().positive(),
    linkCeilingGBps: z.number().positive(),
    dispatchToPublishOneBlockMs: z.strictObject({ min: nonNegative, max: nonNegative }),
  }),
});

/** Validates a parsed profile file; a RangeError names the field, its value and `source` (the file). */
export function parseEngineProfile(json: unknown, source: string): EngineProfile {
  const p = parseJsonField(engineProfileSchema, json, source) as EngineProfile;
  const d = p.transfer.dispatchToPublishOneBlockMs;
  if (d.min > d.max) {
    throw new RangeError(`${source}: "transfer.dispatchToPublishOneBlockMs" min ${d.min} is above max ${d.max}`);
  }
  return p;
}

/** Reads and validates a profile file (default: the checked-in H200 profile). */
export function loadEngineProfile(path: string = DEFAULT_ENGINE_PROFILE_PATH): EngineProfile {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new RangeError(`engine profile ${path} cannot be read: ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new RangeError(`engine profile ${path} is not JSON: ${e instanceof Error ? e.message : String(e)}`, {
      cause: e,
    });
  }
  return parseEngineProfile(json, path);
}

/** The transfer figures a profile made now starts with. */
export function defaultTransfer(): TransferDefaults {
  return structuredClone(H200_NVLINK_TRANSFER);
}
