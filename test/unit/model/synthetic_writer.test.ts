// Synthetic model writer: files, determinism, independence from sharding, weight statistics,
// dtypes, and ensureModel's atomic cache under concurrent processes.
import { expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readModelSpec } from "../../../lib/model/config.ts";
import { cachedModelDir } from "../../../lib/model/demo_model.ts";
import { decodeFloats } from "../../../lib/model/float_formats.ts";
import { planWeightLoad } from "../../../lib/model/loader.ts";
import { presetConfig } from "../../../lib/model/presets.ts";
import { openModelWeights } from "../../../lib/model/shards.ts";
import { writeSyntheticModel } from "../../../lib/model/synthetic_writer.ts";

// The tiny preset's shapes with a small vocabulary, so each write is ~200 KB of weights.
const SMALL = { ...presetConfig("tiny"), vocab_size: 1000 };

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "lmpool-synth-"));
}

function tensorsOf(dir: string): Map<string, { dtype: string; shape: readonly number[]; bytes: Uint8Array }> {
  return new Map(
    [...openModelWeights(dir).tensors].map(([n, t]) => [n, { dtype: t.dtype, shape: t.shape, bytes: t.bytes }]),
  );
}

test("writes a loadable HF directory with the real tokenizer and N(0, 0.02) weights", () => {
  const root = tempDir();
  try {
    const dir = join(root, "m");
    const progress: number[] = [];
    const info = writeSyntheticModel(dir, {
      config: SMALL,
      seed: 7,
      onProgress: (done, total) => progress.push(done / total),
    });
    expect(readdirSync(dir).sort()).toEqual([
      "config.json",
      "generation_config.json",
      "model.safetensors",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
    expect(info.shards).toEqual(["model.safetensors"]);
    expect(progress.at(-1)).toBe(1);
    expect(progress.every((p, i) => i === 0 || p >= progress[i - 1]!)).toBe(true);
    const spec = readModelSpec(dir);
    expect(spec.native.vocabSize).toBe(1000);
    expect(spec.torchDtype).toBe("bfloat16");
    expect(spec.eosTokenIds).toEqual([151645, 151643]);
    expect(JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")).eos_token).toBe("<|im_end|>");
    const plan = planWeightLoad(spec, openModelWeights(dir));
    for (const { slot, tensor } of plan) {
      const v = decodeFloats(tensor.bytes, "BF16");
      if (slot.name.endsWith("norm.weight")) {
        expect(v.every((x) => x === 1)).toBe(true);
        continue;
      }
      let s = 0, s2 = 0;
      for (const x of v) (s += x), (s2 += x * x);
      const mean = s / v.length, std = Math.sqrt(s2 / v.length - mean * mean);
      // Sampling error of the std over >= 2048 values is ~1.6%; of the mean ~0.0005.
      expect(Math.abs(std - 0.02)).toBeLessThan(0.002);
      expect(Math.abs(mean)).toBeLessThan(0.003);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("same seed writes the same tensors, whatever the sharding; another seed differs", () => {
  const root = tempDir();
  try {
    writeSyntheticModel(join(root, "a"), { config: SMALL, seed: 3 });
    const sharded = writeSyntheticModel(join(root, "b"), { config: SMALL, seed: 3, maxShardBytes: 40_000 });
    writeSyntheticModel(join(root, "c"), { config: SMALL, seed: 4 });
    expect(sharded.shards.length).toBeGreaterThan(2);
    expect(sharded.shards[0]).toBe(`model-00001-of-${String(sharded.shards.length).padStart(5, "0")}.safetensors`);
    expect(existsSync(join(root, "b", "model.safetensors.index.json"))).toBe(true);
    const a = tensorsOf(join(root, "a")), b = tensorsOf(join(root, "b")), c = tensorsOf(join(root, "c"));
    expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
    for (const [name, t] of a) {
      expect(b.get(name)!.bytes).toEqual(t.bytes);
      if (!name.endsWith("norm.weight")) expect(c.get(name)!.bytes).not.toEqual(t.bytes);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("float16 and float32 weights and untied llama configs", () => {
  const root = tempDir();
  try {
    const llama = { ...presetConfig("tiny-llama"), vocab_size: 500 };
    writeSyntheticModel(join(root, "f32"), { config: llama, dtype: "float32" });
    writeSyntheticModel(join(root, "f16"), { config: llama, dtype: "float16" });
    const f32 = tensorsOf(join(root, "f32")), f16 = tensorsOf(join(root, "f16"));
    expect(f32.get("lm_head.weight")!.dtype).toBe("F32");
    expect(f16.get("lm_head.weight")!.dtype).toBe("F16");
    expect(f32.has("model.layers.0.self_attn.q_norm.weight")).toBe(false);
    // Both dtypes encode the same table entries, so values agree to f16 precision.
    const x = decodeFloats(f32.get("model.layers.1.mlp.up_proj.weight")!.bytes, "F32");
    const y = decodeFloats(f16.get("model.layers.1.mlp.up_proj.weight")!.bytes, "F16");
    for (let i = 0; i < x.length; i++) {
      expect(Math.abs(x[i]! - y[i]!)).toBeLessThanOrEqual(Math.abs(x[i]!) * 2 ** -11 + 1e-7);
    }
    expect(readModelSpec(join(root, "f16")).torchDtype).toBe("float16");
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("argument errors name the bad value", () => {
  const root = tempDir();
  try {
    writeSyntheticModel(join(root, "m"), { config: SMALL });
    expect(() => writeSyntheticModel(join(root, "m"), { config: SMALL })).toThrow(/is not empty/);
    expect(() => writeSyntheticModel(join(root, "x"), { config: SMALL, preset: "tiny" })).toThrow(/exactly one/);
    expect(() => writeSyntheticModel(join(root, "y"), { preset: "huge" as "tiny" })).toThrow(/"huge"/);
    expect(() => writeSyntheticModel(join(root, "z"), { config: SMALL, dtype: "int8" as "float16" })).toThrow(/"int8"/);
    expect(() => writeSyntheticModel(join(root, "w"), { config: { ...SMALL, architectures: ["GPTJForCausalLM"] } }))
      .toThrow(/GPTJForCausalLM/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("ensureModel in concurrent processes yields one complete model and no temp leftovers", async () => {
  const cacheDir = tempDir();
  try {
    const script = `import { ensureModel } from ${
      JSON.stringify(new URL("../../../lib/model/demo_model.ts", import.meta.url).pathname)
    };
      console.log(await ensureModel("tiny", { cacheDir: ${JSON.stringify(cacheDir)} }));`;
    const run = () =>
      new Promise<string>((resolve, reject) => {
        const p = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "pipe"] });
        let out = "", err = "";
        p.stdout.on("data", (d) => (out += d));
        p.stderr.on("data", (d) => (err += d));
        p.on("close", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`exit ${code}: ${err}`))));
      });
    const dirs = await Promise.all([run(), run(), run()]);
    const expected = cachedModelDir("tiny", { cacheDir });
    expect(dirs).toEqual([expected, expected, expected]);
    expect(readdirSync(cacheDir)).toEqual([expected.split("/").pop()!]);
    const spec = readModelSpec(expected);
    expect(spec.native.vocabSize).toBe(151936);
    expect(planWeightLoad(spec, openModelWeights(expected)).length).toBe(24);
  } finally {
    rmSync(cacheDir, { recursive: true, force: true });
  }
});
