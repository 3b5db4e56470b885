// CUDA: a row with invalid sampling parameters is skipped (token -1, logprob NaN, LP_OK) on every
// path the step can take: an eager prefill with the cuBLAS LM head, decode graphs with the fused
// GEMV head (batch 2) and with cuBLAS (batch 12, padded to a graph of 16), and the async halves
// (launch, then collect without waiting). The other rows sample exactly what the same batch with
// the bad rows made greedy samples (the skipped row is packed as a greedy row, so the kernels see
// the same shapes), and the CPU backend skips the same rows. Skips without CUDA.
import { describe, expect, test } from "bun:test";
import type { KvCache, NativeModel, StepBatch } from "../../ffi/native.ts";
import { createRandomModel, KERNEL_QWEN3, testSeed } from "../helpers/random_model.ts";
import { buildStep, type SampleRow, type SeqStep } from "../helpers/step_builder.ts";
import { openBackends } from "./cuda_backends.ts";

const backends = openBackends();

const BAD: Partial<SampleRow>[] = [{ temperature: Infinity }, { temperature: NaN }, { temperature: 1, topP: 0 }, {
  temperature: -1,
}, { temperature: 0.5, topP: NaN }];

describe("CUDA: bad sampling rows are skipped, the step goes on", () => {
  if ("skip" in backends) {
    test.skip(`skipped: ${backends.skip}`, () => {});
    return;
  }
  const seed = testSeed();
  const ctx = `seed ${seed} (replay: LP_TEST_SEED=${seed})`;
  const opts = {
    ...KERNEL_QWEN3,
    seed,
    vocabSize: 1000,
    maxNumTokens: 512,
    maxNumSeqs: 64,
  };
  const cuda = createRandomModel(backends.cuda, opts), cpu = createRandomModel(backends.cpu, opts);
  const bs = 16, batch = 12;
  const kvs: [NativeModel, KvCache][] = [[cuda.model, cuda.model.createKvCache(batch * 4, bs)], [
    cpu.model,
    cpu.model.createKvCache(batch * 4, bs),
  ]];
  const tables = Array.from({ length: batch }, (_, s) => [0, 1, 2, 3].map((j) => s * 4 + j));
  const prompts = tables.map((_, s) =>
    Array.from({ length: 5 + 3 * s }, (_, i) => (s * 131 + i * 17) % opts.vocabSize)
  );

  /** Runs `steps` with `rows` on one backend (async halves when asked). */
  function run([model, kv]: [NativeModel, KvCache], steps: SeqStep[], rows: SampleRow[], halves = false): StepBatch {
    const b = buildStep(steps, bs, { rows });
    if (halves) {
      model.stepLaunch(kv, b);
      while (!model.stepCollect(false));
    } else {
      model.step(kv, b);
    }
    return b;
  }

  /** The batch with bad rows, then with them greedy: bad rows -1/NaN, good rows identical. */
  function check(what: string, steps: SeqStep[], rows: SampleRow[], badAt: number[], halves = false): void {
    const withBad = run(kvs[0]!, steps, rows, halves);
    const greedy = run(kvs[0]!, steps, rows.map((r, i) => (badAt.includes(i) ? { token: r.token } : r)), halves);
    const onCpu = run(kvs[1]!, steps, rows);
    for (let r = 0; r < rows.length; r++) {
      if (badAt.includes(r)) {
        if (withBad.outTokens[r] !== -1) {
          throw new Error(`${ctx} ${what}: bad row ${r} sampled ${withBad.outTokens[r]}, expected -1`);
        }
        expect(Number.isNaN(withBad.outLogprobs[r]!)).toBe(true);
        expect(onCpu.outTokens[r]!).toBe(-1);
      } else {
        if (withBad.outTokens[r] !== greedy.outTokens[r]) {
          throw new Error(
            `${ctx} ${what}: good row ${r} sampled ${withBad.outTokens[r]}, ${
              greedy.outTokens[r]
            } with the bad rows greedy`,
          );
        }
        expect(withBad.outLogprobs[r]!).toBe(greedy.outLogprobs[r]!);
        expect(withBad.outTokens[r]!).toBeGreaterThanOrEqual(0);
      }
    }
    // No flag outlives its step: the same batch all good samples every row.
    const after = run(
      kvs[0]!,
      steps,
      rows.map((r) => ({ token: r.token, temperature: 0.7, seed: r.seed ?? 1n })),
      halves,
    );
    for (let r = 0; r < rows.length; r++) expect(after.outTokens[r]!).toBeGreaterThanOrEqual(0);
  }

  const rowsFor = (
    n: number,
    bad: (r: number) => Partial<SampleRow> | null,
    token: (r: number) => number,
  ): { rows: SampleRow[]; badAt: number[] } => {
    const rows: SampleRow[] = [], badAt: number[] = [];
    for (let r = 0; r < n; r++) {
      const b = bad(r);
      if (b) badAt.push(r);
      rows.push({ token: token(r), temperature: 0.9, topK: 50, topP: 0.95, seed: BigInt(1000 + r), ...b });
    }
    return { rows, badAt };
  };

  test("eager prefill of 12 sequences, 5 bad rows among 12 (cuBLAS LM head)", () => {
    const steps = prompts.map((p, s) => ({ tokens: p, cached: 0, blockTable: tables[s]! }));
    const last = steps.map((_, s) => steps.slice(0, s + 1).reduce((n, x) => n + x.tokens.length, 0) - 1);
    const { rows, badAt } = rowsFor(batch, (r) => (r % 2 === 1 && r < 10 ? BAD[(r - 1) / 2]! : null), (r) => last[r]!);
    check("prefill", steps, rows, badAt);
  });

  test("decode graph of batch 2 (fused GEMV head), second row bad, both step forms", () => {
    const steps = [0, 1].map((s) => ({ tokens: [7 + s], cached: prompts[s]!.length, blockTable: tables[s]! }));
    const { rows, badAt } = rowsFor(2, (r) => (r === 1 ? { temperature: Infinity } : null), (r) => r);
    check("decode 2", steps, rows, badAt);
    check("decode 2 (halves)", steps, rows, badAt, true);
  });

  test("decode graph of 16 for batch 12 (cuBLAS head), rows 0, 5 and 11 bad", () => {
    const steps = prompts.map((p, s) => ({ tokens: [3 + s], cached: p.length, blockTable: tables[s]! }));
    const bad = new Map([[0, BAD[0]!], [5, BAD[2]!], [11, BAD[1]!]]);
    const { rows, badAt } = rowsFor(batch, (r) => bad.get(r) ?? null, (r) => r);
    check("decode 12", steps, rows, badAt);
    check("decode 12 (halves)", steps, rows, badAt, true);
  });
});
