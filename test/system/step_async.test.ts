// LocalEngine.stepAsync on the CPU backend behind a model that finishes its steps only after some
// polls, as a GPU does: while a step is on the "device" the caller's event loop turns (a request
// added then runs in a later step); an abort then waits for the step's end and its final delta comes
// with that step's report; outputs equal the synchronous engine's; block invariants hold throughout.
import { beforeAll, expect, test } from "bun:test";
import { type KvCache, Native, type NativeModel, type StepBatch } from "../../ffi/native.ts";
import type { StreamDelta } from "../../lib/core/outputs.ts";
import { resolveSamplingParams } from "../../lib/core/sampling_params.ts";
import { Sequence } from "../../lib/core/sequence.ts";
import { LocalEngine } from "../../lib/local/local_engine.ts";
import type { StepModel } from "../../lib/local/model_runner.ts";
import { loadModel } from "../../lib/model/loader.ts";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

const BS = 8;
let model: NativeModel;

beforeAll(async () => {
  ({ model } = await loadModel(engineTestModelDir(), new Native({ backend: "cpu" }), {
    maxNumTokens: 64,
    maxNumSeqs: 8,
  }));
});

/** The CPU model, but a launched step is computed only at its third poll (and never at launch). */
class DeferredStepModel implements StepModel {
  readonly launchesAsync = true;
  polls = 0;
  #pending: { kv: KvCache; batch: StepBatch; polls: number } | undefined;
  constructor(readonly inner: NativeModel) {}
  step(kv: KvCache, batch: StepBatch): void {
    this.inner.step(kv, batch);
  }
  stepLaunch(kv: KvCache, batch: StepBatch): void {
    if (this.#pending) throw new Error("launched twice");
    this.#pending = { kv, batch, polls: 0 };
  }
  stepCollect(wait: boolean): boolean {
    const p = this.#pending;
    if (!p) throw new Error("collect without a launch");
    this.polls++;
    if (!wait && ++p.polls < 3) return false;
    this.inner.step(p.kv, p.batch);
    this.#pending = undefined;
    return true;
  }
}

function engine(m: StepModel & { inner?: NativeModel }): LocalEngine {
  const kv = (m.inner ?? (m as unknown as NativeModel)).createKvCache(48, BS);
  return new LocalEngine({
    model: m as NativeModel,
    kv,
    maxNumSeqs: 8,
    maxNumBatchedTokens: 32,
    maxModelLen: 96,
    enableChunkedPrefill: true,
    enablePrefixCaching: true,
    tokenizer: null,
    eosTokenIds: [],
  });
}

const seq = (id: string, tokens: number[], maxTokens: number) =>
  new Sequence({
    requestId: id,
    promptTokenIds: tokens,
    params: resolveSamplingParams({ maxTokens, temperature: 0, ignoreEos: true }),
    blockSize: BS,
  });

test("steps on the device leave the event loop turning; aborts wait for the step's end", async () => {
  const next = rng(7);
  const prompts = [0, 1, 2].map(() => randomTokens(next, 20));
  const deferred = new DeferredStepModel(model);
  const e = engine(deferred);
  e.add(seq("a", prompts[0]!, 6));
  e.add(seq("b", prompts[1]!, 6));
  const finals = new Map<string, StreamDelta>();
  let turns = 0;
  let abortedDuring: StreamDelta | null | undefined;
  const turn = async () => {
    turns++;
    if (turns === 4) {
      e.add(seq("c", prompts[2]!, 4)); // arrives while a step is on the device
      abortedDuring = e.abort("b"); // b is in that step: its blocks stay until the step ends
      e.blocks.checkInvariants({ liveBlockTables: e.liveBlockTables() });
    }
    await new Promise<void>((r) => setImmediate(r));
  };
  while (e.hasWork) {
    const report = await e.stepAsync(turn);
    for (const d of report.deltas) if (d.finished) finals.set(d.requestId, d);
    e.blocks.checkInvariants({ liveBlockTables: e.liveBlockTables() });
  }
  expect(turns).toBeGreaterThan(4);
  expect(abortedDuring).toBeNull();
  expect(finals.get("b")?.output?.finishReason).toBe("abort");
  e.blocks.checkInvariants({ drained: true, liveBlockTables: [] });

  // The same requests on the synchronous engine (c arrives at the start): the same tokens.
  const sync = engine(model);
  sync.add(seq("a", prompts[0]!, 6));
  sync.add(seq("c", prompts[2]!, 4));
  const want = new Map<string, number[]>();
  while (sync.hasWork) for (const d of sync.step().deltas) if (d.finished) want.set(d.requestId, d.output!.tokenIds);
  expect(finals.get("a")!.output!.tokenIds).toEqual(want.get("a")!);
  expect(finals.get("c")!.output!.tokenIds).toEqual(want.get("c")!);
  await expect(e.stepAsync(turn)).resolves.toMatchObject({ kind: "idle" });
});

test("a second stepAsync while one runs is refused; without a launch/collect model it runs the step at once", async () => {
  const e = engine(new DeferredStepModel(model));
  e.add(seq("x", randomTokens(rng(3), 12), 2));
  const first = e.stepAsync(() => new Promise<void>((r) => setImmediate(r)));
  await expect(e.stepAsync(async () => {})).rejects.toThrow(/a step is already running/);
  await first;
  const plain = engine(model);
  expect(plain.readsMessagesDuringSteps).toBe(false); // the CPU computes at launch
  plain.add(seq("y", randomTokens(rng(4), 12), 2));
  let turned = false;
  const r = await plain.stepAsync(async () => void (turned = true));
  expect(r.kind).toBe("prefill");
  expect(turned).toBe(false);
});
