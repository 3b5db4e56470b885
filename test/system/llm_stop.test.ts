// Stop conditions on the CPU backend: EOS (and ignoreEos), stop token ids, min_tokens, stop
// strings (streamed with hold-back), max_tokens. Stop tokens are picked from a reference greedy
// run, so each test knows exactly where generation must end.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Native } from "../../ffi/native.ts";
import type { RequestOutput, StreamDelta } from "../../lib/core/outputs.ts";
import { resolveSamplingParams, type SamplingParams } from "../../lib/core/sampling_params.ts";
import { Sequence } from "../../lib/core/sequence.ts";
import { LLM } from "../../lib/engine/llm.ts";
import { LocalEngine } from "../../lib/local/local_engine.ts";
import { loadModel } from "../../lib/model/loader.ts";
import { ModelTokenizer } from "../../lib/model/tokenizer.ts";
import { engineTestModelDir, randomTokens, rng } from "./llm_fixtures.ts";

const MAX = 14;
let llm: LLM;
let prompt: number[];
let ref: RequestOutput;
/** Index of the first output token that did not occur before it (at least 3). */
let k: number;

beforeAll(async () => {
  llm = await LLM.create({ model: engineTestModelDir(), backend: "cpu", numBlocks: 32, maxModelLen: 128 });
  const next = rng(9);
  for (;;) {
    prompt = randomTokens(next, 20);
    [ref] = (await llm.generate({ promptTokenIds: prompt }, { maxTokens: MAX, temperature: 0 })) as [RequestOutput];
    const ids = ref.tokenIds;
    const found = ids.findIndex((t, i) => i >= 3 && i < MAX - 4 && !ids.slice(0, i).includes(t));
    if (found >= 0) {
      k = found;
      break;
    }
  }
});
afterAll(() => llm.shutdown());

const greedy = (p: Partial<SamplingParams> = {}) => ({ maxTokens: MAX, temperature: 0, ...p });
const decode = (ids: number[]) => llm.tokenizer.decode(ids, { skipSpecialTokens: true });

describe("token-level stops", () => {
  test("max_tokens ends with finishReason length", () => {
    expect(ref.tokenIds).toHaveLength(MAX);
    expect(ref.finishReason).toBe("length");
  });

  test("a stop token id ends generation; the id is kept, its text is not", async () => {
    const stop = ref.tokenIds[k]!;
    const [o] = await llm.generate({ promptTokenIds: prompt }, greedy({ stopTokenIds: [stop] }));
    expect(o!.tokenIds).toEqual(ref.tokenIds.slice(0, k + 1));
    expect(o!.finishReason).toBe("stop");
    expect(o!.text).toBe(decode(ref.tokenIds.slice(0, k)));
  });

  test("min_tokens bans a stop token from sampling until enough tokens exist, as vLLM does", async () => {
    const stop = ref.tokenIds[k]!;
    const minTokens = k + 2;
    const [o] = await llm.generate({ promptTokenIds: prompt }, greedy({ stopTokenIds: [stop], minTokens }));
    // Greedy picks the same tokens until the stop token would come; there the next best is taken.
    expect(o!.tokenIds.slice(0, k)).toEqual(ref.tokenIds.slice(0, k));
    expect(o!.tokenIds[k]).not.toBe(stop);
    expect(o!.tokenIds.slice(0, minTokens)).not.toContain(stop);
    expect(o!.tokenIds.length).toBeGreaterThanOrEqual(minTokens);
  });
});

describe("EOS", () => {
  test("EOS stops generation unless ignoreEos; min_tokens defers it", async () => {
    const native = new Native({ backend: "cpu" });
    const dir = engineTestModelDir();
    const { model } = await loadModel(dir, native, { maxNumTokens: 64, maxNumSeqs: 4 });
    const eos = ref.tokenIds[k]!;
    const e = new LocalEngine({
      model,
      kv: model.createKvCache(32, 16),
      maxNumSeqs: 4,
      maxNumBatchedTokens: 64,
      maxModelLen: 128,
      enableChunkedPrefill: true,
      enablePrefixCaching: true,
      tokenizer: ModelTokenizer.fromDir(dir),
      eosTokenIds: [eos],
    });
    const run = (id: string, p: Partial<SamplingParams>): RequestOutput => {
      e.add(
        new Sequence({
          requestId: id,
          promptTokenIds: prompt,
          params: resolveSamplingParams(greedy(p)),
          blockSize: 16,
        }),
      );
      for (;;) {
        const d = e.step().deltas.find((x) => x.requestId === id && x.finished);
        if (d) return d.output!;
      }
    };
    const stopped = run("eos", {});
    expect(stopped.tokenIds).toEqual(ref.tokenIds.slice(0, k + 1));
    expect(stopped.finishReason).toBe("stop");
    expect(stopped.text).toBe(decode(ref.tokenIds.slice(0, k)));
    const ignored = run("ignore", { ignoreEos: true });
    expect(ignored.tokenIds).toEqual(ref.tokenIds);
    expect(ignored.finishReason).toBe("length");
    const deferred = run("min", { minTokens: k + 2 });
    expect(deferred.tokenIds.slice(0, k)).toEqual(ref.tokenIds.slice(0, k));
    expect(deferred.tokenIds.slice(0, k + 2)).not.toContain(eos); // banned from sampling, not only ignored
    expect(deferred.tokenIds.length).toBeGreaterThanOrEqual(k + 2);
    e.blocks.checkInvariants({ drained: true });
    model.dispose();
  });
});

describe("stop strings", () => {
  /** A stop string starting inside token k's text that does not occur earlier. */
  function pickStop(): { stop: string; cut: number } {
    const full = decode(ref.tokenIds);
    const before = decode(ref.tokenIds.slice(0, k));
    const piece = decode(ref.tokenIds.slice(0, k + 2)).slice(before.length);
    for (let len = Math.min(4, piece.length); len >= 2; len--) {
      const stop = piece.slice(0, len);
      if (full.indexOf(stop) === before.length && stop.trim().length > 0) return { stop, cut: before.length };
    }
    throw new Error(`no usable stop string in ${JSON.stringify(piece)}`);
  }

  test("generation stops at the stop string, which is not in the text", async () => {
    const { stop, cut } = pickStop();
    const full = decode(ref.tokenIds);
    const [o] = await llm.generate({ promptTokenIds: prompt }, greedy({ stop: [stop] }));
    expect(o!.finishReason).toBe("stop");
    expect(o!.text).toBe(full.slice(0, cut));
    expect(o!.tokenIds.length).toBeLessThan(MAX);
    expect(o!.tokenIds).toEqual(ref.tokenIds.slice(0, o!.tokenIds.length));
  });

  test("streamed text holds back a possible stop string and concatenates to the final text", async () => {
    const { stop } = pickStop();
    const deltas: StreamDelta[] = [];
    for await (const d of llm.stream({ promptTokenIds: prompt }, greedy({ stop: [stop] }))) deltas.push(d);
    const out = deltas.at(-1)!.output!;
    expect(deltas.map((d) => d.text).join("")).toBe(out.text);
    for (const d of deltas) expect(d.text.includes(stop)).toBe(false);
    // Without stop strings streaming yields the reference text.
    const plain: string[] = [];
    for await (const d of llm.stream({ promptTokenIds: prompt }, greedy())) plain.push(d.text);
    expect(plain.join("")).toBe(ref.text);
  });

  test("min_tokens: a stop string completing before it is text; one straddling it stops generation", async () => {
    // Output token j whose text ends a stop string that began in token j - 1's text, found nowhere earlier.
    const full = decode(ref.tokenIds);
    let pick: { j: number; stop: string; cut: number } | undefined;
    for (let j = 2; j < MAX - 2 && !pick; j++) {
      const a = decode(ref.tokenIds.slice(0, j - 1)).length;
      const b = decode(ref.tokenIds.slice(0, j)).length;
      const c = decode(ref.tokenIds.slice(0, j + 1)).length;
      if (b - a < 1 || c - b < 1) continue;
      const stop = full.slice(b - 1, b + 1); // last char of token j - 1, first of token j
      if (full.indexOf(stop) === b - 1) pick = { j, stop, cut: b - 1 };
    }
    if (!pick) throw new Error(`no straddling stop string in ${JSON.stringify(full)}`);
    const { j, stop, cut } = pick;
    // Armed from output token j on (j tokens precede it): the stop string completes in it.
    const [o] = await llm.generate({ promptTokenIds: prompt }, greedy({ stop: [stop], minTokens: j }));
    expect(o!.finishReason).toBe("stop");
    expect(o!.tokenIds).toEqual(ref.tokenIds.slice(0, j + 1));
    expect(o!.text).toBe(full.slice(0, cut));
    // Armed only after it: the stop string is ordinary text and generation runs on.
    const [late] = await llm.generate({ promptTokenIds: prompt }, greedy({ stop: [stop], minTokens: j + 1 }));
    expect(late!.tokenIds.length).toBeGreaterThan(j + 1);
    expect(late!.text.startsWith(full.slice(0, cut + stop.length))).toBe(true);
  });
});
