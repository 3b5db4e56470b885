// KV block gather/scatter: the packed layout [L, 2, n, block_size, kv_heads, head_dim], exact byte
// round trips, untouched blocks stay untouched, and blocks moved to another cache decode the same.
import { describe, expect, test } from "bun:test";
import { native } from "../../ffi/native.ts";
import { rng } from "../helpers/bf16.ts";
import { createRandomModel, testSeed } from "../helpers/random_model.ts";
import { buildStep, rowLogits } from "../helpers/step_builder.ts";

const ELEM_BYTES = native().backend === "cpu" ? 4 : 2;

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a).equals(Buffer.from(b));
}

describe(`KV gather/scatter (${native().backend} backend)`, () => {
  const seed = testSeed();
  const ctx = `seed ${seed} (replay: LP_TEST_SEED=${seed})`;
  const rand = rng(seed ^ 0x4b56);
  const { config, model } = createRandomModel(native(), { arch: "llama", tie: false, seed });
  const L = config.numLayers, kvh = config.numKvHeads, hd = config.headDim;

  test("block bytes and the packed layout", () => {
    for (const bs of [16, 32]) {
      using kv = model.createKvCache(8, bs);
      expect(kv.blockBytes).toBe(L * 2 * bs * kvh * hd * ELEM_BYTES);
      const fill = new Uint8Array(3 * kv.blockBytes).map(() => Math.floor(rand() * 256));
      kv.scatter(Int32Array.of(6, 1, 4), fill);
      const pair = kv.gather(Int32Array.of(4, 6));
      const chunk = kv.blockBytes / (2 * L);
      // Chunk (layer*2 + K/V, i) of a 2-block gather is chunk (layer*2 + K/V) of block i alone.
      [4, 6].forEach((id, i) => {
        const one = kv.gather(Int32Array.of(id));
        for (let lw = 0; lw < 2 * L; lw++) {
          const got = pair.subarray((lw * 2 + i) * chunk, (lw * 2 + i + 1) * chunk);
          if (!bytesEqual(got, one.subarray(lw * chunk, (lw + 1) * chunk))) {
            throw new Error(
              `${ctx}: block ${id} layer ${lw >> 1} ${lw & 1 ? "V" : "K"} misplaced in the packed buffer`,
            );
          }
        }
      });
    }
  });

  test("scatter then gather round-trips bytes exactly; other blocks are untouched", () => {
    using kv = model.createKvCache(10, 16);
    const before = kv.gather(Int32Array.of(0, 5, 9));
    const ids = Int32Array.of(3, 7, 1, 8);
    const payload = new Uint8Array(ids.length * kv.blockBytes).map(() => Math.floor(rand() * 256));
    kv.scatter(ids, payload);
    if (!bytesEqual(kv.gather(ids), payload)) throw new Error(`${ctx}: gather after scatter differs`);
    if (!bytesEqual(kv.gather(Int32Array.of(0, 5, 9)), before)) throw new Error(`${ctx}: untouched blocks changed`);
  });

  test("blocks moved to another cache decode exactly as in the source", () => {
    const bs = 16, V = config.vocabSize;
    const prompt = Array.from({ length: 2 * bs + 5 }, () => Math.floor(rand() * V));
    const src = model.createKvCache(12, bs), dst = model.createKvCache(12, bs);
    const srcTable = [5, 2, 9], dstTable = [0, 7, 3];
    model.step(src, buildStep([{ tokens: prompt, cached: 0, blockTable: srcTable }], bs));
    dst.scatter(Int32Array.from(dstTable), src.gather(Int32Array.from(srcTable)));
    const decode = (kv: typeof src, table: number[]) => {
      const b = buildStep([{ tokens: [17], cached: prompt.length, blockTable: table }], bs, { vocab: V });
      model.step(kv, b);
      return Float32Array.from(rowLogits(b, 0, V));
    };
    const a = decode(src, srcTable), b = decode(dst, dstTable);
    if (!a.every((x, i) => x === b[i])) throw new Error(`${ctx}: decode after transfer differs`);
    src.dispose();
    dst.dispose();
  });
});
