/**
 * Clients that hang up: in prefill (before the first token of a long prompt), while streaming
 * (after a few tokens), and during KV transfers (shared-prefix streams with transfers forced).
 * The server frees what each held: after the load drains no block is leaked and it still serves.
 * @module
 */
import type { CaseContext, FaultCase } from "../fault_case.ts";
import { promptText } from "../load.ts";
import { SeededRandom } from "../../workloads/prng.ts";
import type { RequestOutcome } from "../request_outcome.ts";
import { METRIC } from "../server_watch.ts";
import { promptOfTokens, streamRequest } from "./worker_faults.ts";
import { forcedTransferArgs, transferWave } from "./worker_kill.ts";

function disconnects(ctx: CaseContext): number {
  return ctx.options.quick ? 12 : 200;
}

/** Sends in waves of `ctx.options.ranks * 2`, so the disconnects overlap the load without swamping it. */
async function inWaves(
  ctx: CaseContext,
  total: number,
  one: (i: number) => Promise<RequestOutcome>,
): Promise<RequestOutcome[]> {
  const out: RequestOutcome[] = [];
  const wave = ctx.options.ranks * 2;
  for (let i = 0; i < total && !ctx.expired; i += wave) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(wave, total - i) }, (_, k) => one(i + k)))));
  }
  return out;
}

function noteCancelled(ctx: CaseContext, what: string, outcomes: RequestOutcome[]): void {
  const cancelled = outcomes.filter((o) => o.kind === "cancelled").length;
  ctx.note(`${cancelled} of ${outcomes.length} ${what} requests disconnected (the rest finished before the hang-up)`);
  ctx.check(
    `${what}: some requests were disconnected`,
    cancelled > 0,
    `none of ${outcomes.length} was still running at its hang-up`,
  );
}

/** Disconnects before the first token of long prompts. */
export const disconnectPrefillCase: FaultCase = {
  name: "disconnect-prefill",
  description: "clients hang up while their long prompts prefill: no leaked blocks, still serving",
  timeoutMs: (o) => (o.quick ? 120_000 : 600_000),
  async run(ctx) {
    const { prompt } = await promptOfTokens(ctx, ctx.options.quick ? 2000 : 4000, 31);
    const rng = new SeededRandom(37);
    const outcomes = await inWaves(ctx, disconnects(ctx), (i) => {
      const cancel = new AbortController();
      setTimeout(() => cancel.abort(), 50 + rng.int(0, 250));
      return ctx.send(streamRequest(ctx, "disconnect-prefill", `${i} ${prompt}`, 8, { cancel: cancel.signal }));
    });
    noteCancelled(ctx, "prefill", outcomes);
  },
};

/** Disconnects a few tokens into a stream. */
export const disconnectStreamCase: FaultCase = {
  name: "disconnect-stream",
  description: "clients hang up a few tokens into their streams: no leaked blocks, still serving",
  timeoutMs: (o) => (o.quick ? 120_000 : 600_000),
  async run(ctx) {
    const rng = new SeededRandom(41);
    const outcomes = await inWaves(ctx, disconnects(ctx), () => {
      const cancel = new AbortController();
      const delay = 20 + rng.int(0, 200);
      return ctx.send(
        streamRequest(ctx, "disconnect-stream", promptText(rng, 40), 400, {
          cancel: cancel.signal,
          onFirstToken: () => void setTimeout(() => cancel.abort(), delay),
        }),
      );
    });
    noteCancelled(ctx, "streaming", outcomes);
  },
};

/** Disconnects while shared-prefix requests make transfers run. */
export const disconnectTransferCase: FaultCase = {
  name: "disconnect-transfer",
  description: "clients hang up while KV transfers run (--kv-transfers force): no leaked blocks, still serving",
  serverArgs: forcedTransferArgs,
  timeoutMs: (o) => (o.quick ? 120_000 : 600_000),
  async run(ctx) {
    const before = (await ctx.watch.scrape())?.value(METRIC.transfers) ?? 0;
    const rng = new SeededRandom(47);
    const outcomes: RequestOutcome[] = [];
    const waves = Math.ceil(disconnects(ctx) / (ctx.options.ranks * 2));
    for (let w = 0; w < waves && !ctx.expired; w++) {
      outcomes.push(
        ...(await Promise.all(
          await transferWave(ctx, ctx.options.ranks * 2, 200 + w, () => {
            const cancel = new AbortController();
            setTimeout(() => cancel.abort(), 30 + rng.int(0, 300));
            return { cancel: cancel.signal };
          }),
        )),
      );
    }
    const moved = ((await ctx.watch.scrape())?.value(METRIC.transfers) ?? 0) - before;
    if (moved <= 0) ctx.notRun("no KV transfer ran during the disconnects (transfers between these ranks may be off)");
    else ctx.note(`${moved} transfers ran during the disconnects`);
    noteCancelled(ctx, "transfer", outcomes);
  },
};
