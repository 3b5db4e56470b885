// The shapes one step covers must not change results: shuffled (non-contiguous) block tables equal
// contiguous ones, a prefill whose first blocks come from the prefix cache equals a full prefill,
// and a prefill split into chunks equals one chunk. Block sizes 16 and 32. The fp32 CPU backend is
// batch-invariant, so these agree to rounding (tolerance 1e-6); bf16 backends get 1e-2.
import { describe, expect, test } from "bun:test";
import type { KvCache, NativeModel } from "../../ffi/native.ts";
import { native } from "../../ffi/native.ts";
import { rng } from "../helpers/bf16.ts";
import { createRandomModel, testSeed } from "../helpers/random_model.ts";
import { relL2 } from "../helpers/reference_model.ts";
import { buildStep, rowLogits, type SeqStep, shuffledBlocks } from "../helpers/step_builder.ts";

const SAME = native().backend === "cpu" ? 1e-6 : 1e-2;
const NUM_BLOCKS = 24;

/** Runs one step with a row at every token; returns each row's logits. */
function stepAllRows(model: NativeModel, kv: KvCache, seqs: SeqStep[], vocab: number): Float32Array[] {
  const numTokens = seqs.reduce((n, s) => n + s.tokens.length, 0);
  const rows = Array.from({ length: numTokens }, (_, token) => ({ token }));
  const b = buildStep(seqs, kv.blockSize, { rows, vocab });
  model.step(kv, b);
  return rows.map((_, r) => Float32Array.from(rowLogits(b, r, vocab)));
}

function expectSame(got: Float32Array[], want: Float32Array[], ctx: string): void {
  expect(got.length).toBe(want.length);
  got.forEach((g, i) => {
    const err = relL2(g, want[i]!);
    if (!(err <= SAME)) throw new Error(`${ctx}: row ${i}: rel. L2 ${err} > ${SAME}`);
  });
}

function setup(blockSize: number) {
  const seed = testSeed();
  const rand = rng(seed ^ 0xb10c);
  const m = createRandomModel(native(), { arch: "qwen3", tie: false, seed, maxNumTokens: 128, maxNumSeqs: 128 });
  const tokens = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * m.config.vocabSize));
  const ctx = (what: string) => `${what}, block ${blockSize}, seed ${seed} (replay: LP_TEST_SEED=${seed})`;
  return { ...m, rand, tokens, ctx, V: m.config.vocabSize };
}

describe(`paged attention and prefill shapes (${native().backend} backend)`, () => {
  for (const bs of [16, 32]) {
    test(`shuffled block tables equal contiguous ones (block ${bs})`, () => {
      const { model, rand, tokens, ctx, V } = setup(bs);
      const prompts = [tokens(2 * bs + 9), tokens(bs + 3)];
      const need = prompts.map((p) => Math.ceil((p.length + 4) / bs));
      const contiguous = [[...Array(need[0]).keys()], [...Array(need[1]).keys()].map((i) => i + need[0]!)];
      const ids = shuffledBlocks(rand, NUM_BLOCKS, need[0]! + need[1]!);
      const shuffled = [ids.slice(0, need[0]), ids.slice(need[0])];
      const run = (tables: number[][]) => {
        const kv = model.createKvCache(NUM_BLOCKS, bs);
        const seqs = prompts.map((p, s) => ({ tokens: p, cached: 0, blockTable: tables[s]! }));
        const out = stepAllRows(model, kv, seqs, V);
        // Decode a few tokens (fixed ids) through the same tables.
        for (let step = 0; step < 4; step++) {
          const dec = prompts.map((p, s) => ({
            tokens: [(step * 31 + s) % V],
            cached: p.length + step,
            blockTable: tables[s]!,
          }));
          out.push(...stepAllRows(model, kv, dec, V));
        }
        kv.dispose();
        return out;
      };
      expectSame(run(shuffled), run(contiguous), ctx("shuffled vs contiguous"));
      model.dispose();
    });

    test(`prefix-cache hit equals a full prefill (block ${bs})`, () => {
      const { model, rand, tokens, ctx, V } = setup(bs);
      const prefix = tokens(2 * bs);
      const a = [...prefix, ...tokens(5)], b = [...prefix, ...tokens(bs + 7)];
      const ids = shuffledBlocks(rand, NUM_BLOCKS, 6);
      const tableA = ids.slice(0, 3), tableB = [ids[0]!, ids[1]!, ids[3]!, ids[4]!];

      const kv = model.createKvCache(NUM_BLOCKS, bs);
      stepAllRows(model, kv, [{ tokens: a, cached: 0, blockTable: tableA }], V);
      // B reuses A's two full prefix blocks; its step covers only the suffix.
      const hit = stepAllRows(model, kv, [{ tokens: b.slice(2 * bs), cached: 2 * bs, blockTable: tableB }], V);

      const fresh = model.createKvCache(NUM_BLOCKS, bs);
      const full = stepAllRows(model, fresh, [{ tokens: b, cached: 0, blockTable: [0, 1, 2, 3] }], V);
      expectSame(hit, full.slice(2 * bs), ctx("prefix hit vs full prefill"));
      kv.dispose();
      fresh.dispose();
      model.dispose();
    });

    test(`chunked prefill equals one chunk, also batched with a decode (block ${bs})`, () => {
      const { model, rand, tokens, ctx, V } = setup(bs);
      const prompt = tokens(2 * bs + 13);
      const other = tokens(bs - 3);
      const ids = shuffledBlocks(rand, NUM_BLOCKS, 6);
      const table = ids.slice(0, 4), otherTable = ids.slice(4, 6);

      const whole = model.createKvCache(NUM_BLOCKS, bs);
      const want = stepAllRows(model, whole, [{ tokens: prompt, cached: 0, blockTable: table }], V);

      const chunked = model.createKvCache(NUM_BLOCKS, bs);
      stepAllRows(model, chunked, [{ tokens: other, cached: 0, blockTable: otherTable }], V);
      const got: Float32Array[] = [];
      const cuts = [0, 11, bs + 5, prompt.length];
      for (let c = 0; c + 1 < cuts.length; c++) {
        const chunk = { tokens: prompt.slice(cuts[c], cuts[c + 1]), cached: cuts[c]!, blockTable: table };
        // The other sequence decodes one token in the same step, ahead of the chunk.
        const decode = { tokens: [(c * 17) % V], cached: other.length + c, blockTable: otherTable };
        got.push(...stepAllRows(model, chunked, [decode, chunk], V).slice(1));
      }
      expectSame(got, want, ctx("chunked vs whole prefill"));
      whole.dispose();
      chunked.dispose();
      model.dispose();
    });
  }
});
