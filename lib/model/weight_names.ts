/**
 * Hugging Face tensor names <-> native weight slots (layer, kind), and the shape each slot must
 * have for a given model config. Global weights use layer -1.
 * @module
 */
import type { NativeModelConfig } from "../../ffi/model_config.ts";
import type { WeightKindName } from "../../ffi/native.ts";

/** One weight the native model takes: where it goes, its HF name and its expected shape. */
export interface WeightSlot {
  readonly name: string;
  readonly layer: number;
  readonly kind: WeightKindName;
  readonly shape: readonly number[];
}

const GLOBAL_NAMES = {
  embed: "model.embed_tokens.weight",
  finalNorm: "model.norm.weight",
  lmHead: "lm_head.weight",
} as const satisfies Partial<Record<WeightKindName, string>>;

const LAYER_SUFFIXES = {
  inputNorm: "input_layernorm.weight",
  q: "self_attn.q_proj.weight",
  k: "self_attn.k_proj.weight",
  v: "self_attn.v_proj.weight",
  o: "self_attn.o_proj.weight",
  qNorm: "self_attn.q_norm.weight",
  kNorm: "self_attn.k_norm.weight",
  postNorm: "post_attention_layernorm.weight",
  gate: "mlp.gate_proj.weight",
  up: "mlp.up_proj.weight",
  down: "mlp.down_proj.weight",
} as const satisfies Partial<Record<WeightKindName, string>>;

type GlobalKind = keyof typeof GLOBAL_NAMES;
type LayerKind = keyof typeof LAYER_SUFFIXES;

/** The HF tensor name of a slot (layer -1 for global kinds). */
export function weightName(layer: number, kind: WeightKindName): string {
  if (kind in GLOBAL_NAMES) {
    if (layer !== -1) throw new RangeError(`weight kind ${kind} is global; layer must be -1, got ${layer}`);
    return GLOBAL_NAMES[kind as GlobalKind];
  }
  if (!Number.isInteger(layer) || layer < 0) {
    throw new RangeError(`weight kind ${kind} needs a layer >= 0, got ${layer}`);
  }
  return `model.layers.${layer}.${LAYER_SUFFIXES[kind as LayerKind]}`;
}

const LAYER_NAME = /^model\.layers\.(\d+)\.(.+)$/;
const KIND_BY_SUFFIX = new Map<string, LayerKind>(
  Object.entries(LAYER_SUFFIXES).map(([k, s]) => [s, k as LayerKind]),
);
const KIND_BY_GLOBAL_NAME = new Map<string, GlobalKind>(
  Object.entries(GLOBAL_NAMES).map(([k, n]) => [n, k as GlobalKind]),
);

/** The slot an HF tensor name denotes, or null for tensors LMPool does not use (e.g. rotary buffers). */
export function parseWeightName(name: string): { layer: number; kind: WeightKindName } | null {
  const global = KIND_BY_GLOBAL_NAME.get(name);
  if (global) return { layer: -1, kind: global };
  const m = LAYER_NAME.exec(name);
  if (!m) return null;
  const kind = KIND_BY_SUFFIX.get(m[2]!);
  return kind ? { layer: Number(m[1]), kind } : null;
}

/** Shape (HF layout, [out, in] for linear layers) of a weight kind under `c`. */
export function weightShape(c: NativeModelConfig, kind: WeightKindName): number[] {
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  switch (kind) {
    case "embed":
    case "lmHead":
      return [c.vocabSize, c.hiddenSize];
    case "finalNorm":
    case "inputNorm":
    case "postNorm":
      return [c.hiddenSize];
    case "q":
      return [qDim, c.hiddenSize];
    case "k":
    case "v":
      return [kvDim, c.hiddenSize];
    case "o":
      return [c.hiddenSize, qDim];
    case "qNorm":
    case "kNorm":
      return [c.headDim];
    case "gate":
    case "up":
      return [c.intermediateSize, c.hiddenSize];
    case "down":
      return [c.hiddenSize, c.intermediateSize];
  }
}

/** Every weight the native model requires under `c`, globals first then layer by layer. */
export function requiredWeights(c: NativeModelConfig): WeightSlot[] {
  const out: WeightSlot[] = [];
  const add = (layer: number, kind: WeightKindName) =>
    out.push({ name: weightName(layer, kind), layer, kind, shape: weightShape(c, kind) });
  add(-1, "embed");
  for (let layer = 0; layer < c.numLayers; layer++) {
    for (const kind of Object.keys(LAYER_SUFFIXES) as LayerKind[]) {
      // Per-head q/k RMSNorm is Qwen3's; Llama has none.
      if ((kind === "qNorm" || kind === "kNorm") && c.arch !== "qwen3") continue;
      add(layer, kind);
    }
  }
  add(-1, "finalNorm");
  if (!c.tieWordEmbeddings) add(-1, "lmHead");
  return out;
}

/** True for slots that hold RMSNorm scales (initialized to 1, not random). */
export function isNormKind(kind: WeightKindName): boolean {
  return kind === "finalNorm" || kind === "inputNorm" || kind === "postNorm" || kind === "qNorm" || kind === "kNorm";
}
