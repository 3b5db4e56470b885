/**
 * F3: a valid long prompt (6-8k tokens, within max_model_len) under load: it completes, and no
 * rank is declared down while its long prefill runs (polled the whole time).
 * @module
 */
import type { FaultCase } from "../fault_case.ts";
import { METRIC, POLL_MS } from "../server_watch.ts";
import {
  checkLoadUnharmed,
  checkNoWorkerDied,
  promptOfTokens,
  streamRequest,
  workerBaseline,
} from "./worker_faults.ts";

/** Target prompt length (--quick: the low end of 6-8k, to keep CI short), capped by the model's context less the output. */
const LONG_PROMPT_TOKENS = 7000;
const QUICK_LONG_PROMPT_TOKENS = 6000;
const OUTPUT_TOKENS = 16;

/** The F3 case. */
export const longPromptCase: FaultCase = {
  name: "f3-long-prompt",
  description:
    `a ${LONG_PROMPT_TOKENS}-token prompt (--quick ${QUICK_LONG_PROMPT_TOKENS}; capped by max_model_len) under load: completes, no rank down meanwhile`,
  // One client loop in the CI form: the CPU's two cores go to the long prefill, which is the fault.
  concurrency: (o) => (o.quick ? 1 : o.concurrency),
  timeoutMs: (o) => (o.quick ? 150_000 : 300_000),
  async run(ctx) {
    const before = await workerBaseline(ctx);
    const probe = await promptOfTokens(ctx, 100);
    const target = Math.min(
      ctx.options.quick ? QUICK_LONG_PROMPT_TOKENS : LONG_PROMPT_TOKENS,
      probe.maxModelLen - OUTPUT_TOKENS - 64,
    );
    if (target < 6000) {
      ctx.note(`max_model_len ${probe.maxModelLen}: the prompt is ${target} tokens, under the 6k the case aims at`);
    }
    const { prompt, count } = await promptOfTokens(ctx, target);
    ctx.log(`prompt of ${count} tokens (max_model_len ${probe.maxModelLen})`);
    let done = false;
    const downs: string[] = [];
    const watcher = (async () => {
      while (!done && !ctx.expired) {
        const s = await ctx.watch.scrape();
        const healthy = s?.value(METRIC.healthyRanks);
        if (healthy !== undefined && healthy < ctx.options.ranks) downs.push(`${METRIC.healthyRanks} ${healthy}`);
        for (let r = 0; r < ctx.options.ranks; r++) {
          if (s?.value(METRIC.rankUp, { engine: String(r) }) === 0) downs.push(`rank ${r} down`);
        }
        await Bun.sleep(POLL_MS);
      }
    })();
    const deadlineMs = ctx.options.quick ? 120_000 : 240_000;
    const o = await ctx.send(streamRequest(ctx, `f3:prompt-${count}-tokens`, prompt, OUTPUT_TOKENS, { deadlineMs }));
    done = true;
    await watcher;
    ctx.check(`the ${count}-token prompt completes`, o.kind === "completed", `${o.kind}: ${o.detail.slice(0, 160)}`);
    ctx.note(
      `long prompt: ${count} tokens, first token after ${
        o.firstTokenAt === null ? "-" : ((o.firstTokenAt - o.sentAt) / 1000).toFixed(1)
      } s`,
    );
    ctx.check("no rank declared down during the long prefill", downs.length === 0, downs.slice(0, 3).join("; "));
    await checkNoWorkerDied(ctx, before);
    checkLoadUnharmed(ctx);
  },
};
