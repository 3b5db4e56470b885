// Property test of the engine core on the CPU backend: random arrivals, aborts and oversized
// requests against a cache small enough to force preemption. After every step the block manager's
// invariants hold with the live block tables; after draining nothing is referenced and free +
// reclaimable == total; every request that finished equals the same request run alone.
import { beforeAll, describe, expect, test } from "bun:test";
import { Native, type NativeModel } from "../../ffi/native.ts";
import { CapacityError } from "../../lib/core/errors.ts";
import type { RequestOutput } from "../../lib/core/outputs.ts";
import { resolveSamplingParams } from "../../lib/core/sampling_params.ts";
import { Sequence, type SequenceInit } from "../../lib/core/sequence.ts";
import { LocalEngine } from "../../lib/local/local_engine.ts";
import { loadModel } from "../../lib/model/loader.ts";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

const BS = 8;
const MAX_MODEL_LEN = 96;
let model: NativeModel;

beforeAll(async () => {
  ({ model } = await loadModel(engineTestModelDir(), new Native({ backend: "cpu" }), {
    maxNumTokens: 64,
    maxNumSeqs: 8,
  }));
});

function engine(numBlocks: number, o: { prefix: boolean; chunked: boolean; maxNumBatchedTokens: number }): LocalEngine {
  return new LocalEngine({
    model,
    kv: model.createKvCache(numBlocks, BS),
    maxNumSeqs: 8,
    maxNumBatchedTokens: o.maxNumBatchedTokens,
    maxModelLen: MAX_MODEL_LEN,
    enableChunkedPrefill: o.chunked,
    enablePrefixCaching: o.prefix,
    tokenizer: null,
    eosTokenIds: [],
  });
}

interface Planned {
  init: SequenceInit;
  arriveAt: number;
  abortAt: number | null;
}

function plan(seed: number, count: number): Planned[] {
  const next = rng(seed);
  const prefixes = [0, 1, 2].map(() => randomTokens(next, 8 + Math.floor(next() * 20)));
  return Array.from({ length: count }, (_, i) => {
    const shared = next() < 0.6 ? prefixes[Math.floor(next() * prefixes.length)]! : [];
    const prompt = [...shared, ...randomTokens(next, 1 + Math.floor(next() * 24))];
    const seeded = next() < 0.3;
    const params = resolveSamplingParams({
      maxTokens: 1 + Math.floor(next() * 12),
      ...(seeded ? { temperature: 0.9, topK: 40, seed: i } : { temperature: 0 }),
      logprobs: true,
    });
    const arriveAt = Math.floor(next() * 50);
    return {
      init: { requestId: `p${seed}-${i}`, promptTokenIds: prompt, params, blockSize: BS },
      arriveAt,
      abortAt: next() < 0.15 ? arriveAt + Math.floor(next() * 10) : null,
    };
  });
}

/** Runs `reqs` on `e`, checking invariants after every step; returns outputs by request id. */
function drive(e: LocalEngine, reqs: Planned[]): { outputs: Map<string, RequestOutput>; rejected: number } {
  const outputs = new Map<string, RequestOutput>();
  let rejected = 0;
  const last = Math.max(...reqs.map((r) => Math.max(r.arriveAt, r.abortAt ?? 0)));
  for (let stepNo = 0; stepNo <= last || e.hasWork; stepNo++) {
    for (const r of reqs) {
      if (r.arriveAt === stepNo) {
        try {
          e.add(new Sequence(r.init));
        } catch (err) {
          expect(err).toBeInstanceOf(CapacityError);
          rejected++;
        }
      }
      if (r.abortAt === stepNo) {
        const d = e.abort(r.init.requestId);
        if (d) outputs.set(d.requestId, d.output!);
      }
    }
    for (const d of e.step().deltas) if (d.output) outputs.set(d.requestId, d.output);
    e.blocks.checkInvariants({ liveBlockTables: e.liveBlockTables() });
    if (stepNo > 2000) throw new Error("the engine did not drain within 2000 steps");
  }
  return { outputs, rejected };
}

describe("random arrivals, aborts and preemptions", () => {
  for (const seed of [1, 2, 3]) {
    test(`seed ${seed}: drains cleanly and every finished request equals running it alone`, () => {
      const reqs = plan(seed, 36);
      // A request that can never fit: longer than max_model_len.
      reqs.push({
        init: {
          requestId: `big-${seed}`,
          promptTokenIds: Array(90).fill(3),
          params: resolveSamplingParams({ maxTokens: 10 }),
          blockSize: BS,
        },
        arriveAt: 5,
        abortAt: null,
      });
      const e = engine(16, { prefix: true, chunked: true, maxNumBatchedTokens: 24 });
      const { outputs, rejected } = drive(e, reqs);
      expect(rejected).toBe(1);
      expect(e.scheduler.numPreemptions).toBeGreaterThan(0);
      expect(e.blocks.prefixHitTokens).toBeGreaterThan(0);
      e.blocks.checkInvariants({ drained: true, liveBlockTables: [] });
      expect(e.blocks.numFreeBlocks + e.blocks.numReclaimableBlocks).toBe(e.blocks.numBlocks);

      const finished = [...outputs.values()].filter((o) => o.finishReason !== "abort");
      const aborted = [...outputs.values()].filter((o) => o.finishReason === "abort");
      expect(aborted.length).toBeGreaterThan(0);
      expect(finished.length + aborted.length).toBe(reqs.length - rejected);
      const alone = engine(32, { prefix: false, chunked: false, maxNumBatchedTokens: MAX_MODEL_LEN });
      for (const out of finished) {
        const r = reqs.find((x) => x.init.requestId === out.requestId)!;
        const ref = drive(alone, [{ ...r, arriveAt: 0, abortAt: null }]).outputs.get(out.requestId)!;
        expect({ id: out.requestId, tokens: out.tokenIds }).toEqual({ id: out.requestId, tokens: ref.tokenIds });
        expect(out.tokenIds).toHaveLength(r.init.params.maxTokens);
        out.logprobs!.forEach((lp, j) => expect(lp).toBeCloseTo(ref.logprobs![j]!, 4));
      }
      alone.blocks.checkInvariants({ drained: true });
    });
  }
});

test("an engine without a tokenizer refuses stop strings instead of ignoring them", () => {
  const e = engine(4, { prefix: true, chunked: true, maxNumBatchedTokens: 24 });
  const params = resolveSamplingParams({ stop: ["x"] });
  expect(() => e.add(new Sequence({ requestId: "s", promptTokenIds: [1, 2], params, blockSize: BS }))).toThrow(
    /has stop strings, but this engine does not detokenize/,
  );
  expect(e.hasWork).toBe(false);
});
