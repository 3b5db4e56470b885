// StepWorkTotals: the cumulative counters a worker reports of its pure prefill and decode steps, from
// which the control plane learns each rank's speed (lib/global/device_cost.ts).
import { expect, test } from "bun:test";
import { StepWorkTotals } from "../../../lib/local/step_work.ts";

test("pure prefill steps count their steps and sequences beside tokens and pairs; mixed steps are left out", () => {
  const t = new StepWorkTotals();
  t.add({ decodeSeqs: 0, decodeContext: 0, prefillSeqs: 3, prefillTokens: 24, prefillPairs: 100 }, 1.5);
  t.add({ decodeSeqs: 0, decodeContext: 0, prefillSeqs: 1, prefillTokens: 1000, prefillPairs: 500_500 }, 4);
  t.add({ decodeSeqs: 2, decodeContext: 300, prefillSeqs: 1, prefillTokens: 8, prefillPairs: 8 }, 9);
  t.add({ decodeSeqs: 5, decodeContext: 900, prefillSeqs: 0, prefillTokens: 0, prefillPairs: 0 }, 1);
  expect(t.counters()).toEqual({
    prefill_ms: 5.5,
    prefill_steps: 2,
    prefill_seqs: 4,
    prefill_tokens: 1024,
    prefill_pairs: 500_600,
    decode_ms: 1,
    decode_steps: 1,
    decode_seqs: 5,
    decode_context: 900,
  });
});
