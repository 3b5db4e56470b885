/**
 * lp_model_config (csrc/include/lmpool.h) and its byte layout: 12 int32 fields then 5 floats.
 * @module
 */

/** Model shape as the native library needs it. */
export interface NativeModelConfig {
  arch: "llama" | "qwen3";
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  tieWordEmbeddings: boolean;
  ropeType: "default" | "llama3";
  ropeOriginalMaxPosition: number;
  maxPosition: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeFactor: number;
  ropeLowFreqFactor: number;
  ropeHighFreqFactor: number;
}

/** Bytes of the C struct. */
const MODEL_CONFIG_BYTES = 12 * 4 + 5 * 4;

/** Encodes the config in the C struct's layout. */
export function encodeModelConfig(c: NativeModelConfig): Uint8Array {
  const buf = new Uint8Array(MODEL_CONFIG_BYTES);
  const v = new DataView(buf.buffer);
  const ints = [
    c.arch === "qwen3" ? 1 : 0,
    c.vocabSize,
    c.hiddenSize,
    c.intermediateSize,
    c.numLayers,
    c.numHeads,
    c.numKvHeads,
    c.headDim,
    c.tieWordEmbeddings ? 1 : 0,
    c.ropeType === "llama3" ? 1 : 0,
    c.ropeOriginalMaxPosition,
    c.maxPosition,
  ];
  ints.forEach((x, i) => v.setInt32(i * 4, x, true));
  const floats = [c.rmsNormEps, c.ropeTheta, c.ropeFactor, c.ropeLowFreqFactor, c.ropeHighFreqFactor];
  floats.forEach((x, i) => v.setFloat32(48 + i * 4, x, true));
  return buf;
}
