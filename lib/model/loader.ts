/**
 * Loads a Hugging Face model directory into the native library: parse config.json, map the
 * safetensors shards, check that every required tensor is present with the right shape and a
 * supported dtype (all problems reported at once, before anything is handed over), then hand
 * each tensor to lp_model_set_weight in its own dtype (the library converts) and finalize.
 * @module
 */
import type { DTypeName, Native, NativeModel } from "../../ffi/native.ts";
import { ModelFormatError } from "../core/errors.ts";
import { type ModelSpec, readModelSpec } from "./config.ts";
import type { SafetensorsTensor } from "./safetensors.ts";
import { type ModelWeights, openModelWeights } from "./shards.ts";
import { requiredWeights, type WeightSlot } from "./weight_names.ts";

/** Options of loadModel. */
export interface LoadModelOptions {
  /** Largest number of tokens in one step (sizes the native workspaces). */
  maxNumTokens: number;
  /** Largest number of sequences in one step. */
  maxNumSeqs: number;
  /** Called after each tensor is handed over. */
  onProgress?: (loadedBytes: number, totalBytes: number, tensorName: string) => void;
}

/** A model loaded into the native library, with its spec. */
export interface LoadedModel {
  readonly spec: ModelSpec;
  readonly model: NativeModel;
}

/** A required weight slot matched with the tensor that fills it. */
export interface PlannedWeight {
  readonly slot: WeightSlot;
  readonly tensor: SafetensorsTensor;
  readonly dtype: DTypeName;
}

const NATIVE_DTYPES: Readonly<Record<string, DTypeName>> = { BF16: "bf16", F16: "f16", F32: "f32" };

// Yield to the event loop every so many bytes so a worker keeps answering heartbeats while loading.
const YIELD_EVERY_BYTES = 64 * 1024 * 1024;

/**
 * Matches every required weight of `spec` to a tensor of `weights`. Throws one ModelFormatError
 * naming every missing, misshaped or wrongly typed tensor. Unused tensors are ignored.
 */
export function planWeightLoad(spec: ModelSpec, weights: ModelWeights): PlannedWeight[] {
  const problems: string[] = [];
  const plan: PlannedWeight[] = [];
  const missing: string[] = [];
  for (const slot of requiredWeights(spec.native)) {
    const tensor = weights.tensors.get(slot.name);
    if (!tensor) {
      missing.push(slot.name);
      continue;
    }
    const dtype = NATIVE_DTYPES[tensor.dtype];
    if (!sameShape(tensor.shape, slot.shape)) {
      problems.push(`${slot.name} has shape [${tensor.shape.join(", ")}], expected [${slot.shape.join(", ")}]`);
    } else if (!dtype) {
      problems.push(`${slot.name} has dtype ${tensor.dtype}; supported: ${Object.keys(NATIVE_DTYPES).join(", ")}`);
    } else {
      plan.push({ slot, tensor, dtype });
    }
  }
  if (missing.length > 0) {
    const hint = spec.native.tieWordEmbeddings ? "" : " (tie_word_embeddings is false, so lm_head.weight is required)";
    problems.unshift(`missing tensors${missing.includes("lm_head.weight") ? hint : ""}: ${missing.join(", ")}`);
  }
  if (problems.length > 0) {
    throw new ModelFormatError(
      `${weights.dir}: ${spec.architecture} checkpoint does not match config.json: ${problems.join("; ")}`,
    );
  }
  return plan;
}

/** Loads the model in `dir` into `native` and finalizes it. */
export async function loadModel(dir: string, native: Native, options: LoadModelOptions): Promise<LoadedModel> {
  for (const key of ["maxNumTokens", "maxNumSeqs"] as const) {
    const v = options[key];
    if (!Number.isInteger(v) || v <= 0) throw new RangeError(`loadModel: ${key} must be a positive integer, got ${v}`);
  }
  const spec = readModelSpec(dir);
  const plan = planWeightLoad(spec, openModelWeights(dir));
  const totalBytes = plan.reduce((s, p) => s + p.tensor.bytes.byteLength, 0);
  const model = native.createModel(spec.native);
  try {
    let loaded = 0;
    let sinceYield = 0;
    for (const { slot, tensor, dtype } of plan) {
      model.setWeight(slot.layer, slot.kind, dtype, tensor.bytes, tensor.numel);
      loaded += tensor.bytes.byteLength;
      sinceYield += tensor.bytes.byteLength;
      options.onProgress?.(loaded, totalBytes, slot.name);
      if (sinceYield >= YIELD_EVERY_BYTES) {
        sinceYield = 0;
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
    }
    model.finalize(options.maxNumTokens, options.maxNumSeqs);
  } catch (e) {
    model.dispose();
    throw e;
  }
  return { spec, model };
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}
