/**
 * kill -9 of one worker under load, at three moments: while its long prompts prefill (no first
 * token yet), while its streams decode, and while KV transfers run (server started with
 * `--kv-transfers force`). Requests on the dead rank end with a clear error (or are re-routed and
 * complete); nothing is lost; the rank is detected down and the server is back at full capacity.
 * @module
 */
import type { CaseContext, FaultCase } from "../fault_case.ts";
import type { FaultsOptions } from "../options.ts";
import { promptText } from "../load.ts";
import { SeededRandom } from "../../workloads/prng.ts";
import type { OutgoingRequest, RequestOutcome } from "../request_outcome.ts";
import { METRIC } from "../server_watch.ts";
import { busiestRank, promptOfTokens, recoverFromWorkerFault, signalWorker, streamRequest } from "./worker_faults.ts";

/**
 * Server flags that make transfers run: every candidate admitted, round-robin routing (a prefix
 * revisited on the rank that lacks it is pulled from the one that holds it), and a declared pair
 * where --gpus is a count (ranks of one device copy locally).
 */
export function forcedTransferArgs(o: FaultsOptions): string[] {
  return [
    "--kv-transfers",
    "force",
    "--routing-policy",
    "round-robin",
    ...(/^\d+$/.test(o.gpus) ? ["--nvlink-pairs", "0-1"] : []),
  ];
}

/** Streams that outlive the fault: two per rank, so every rank holds some. */
function victimsCount(ctx: CaseContext): number {
  return ctx.options.ranks * 2;
}

function reportStreams(ctx: CaseContext, what: string, outcomes: RequestOutcome[]): void {
  const by = (k: string) => outcomes.filter((o) => o.kind === k).length;
  ctx.note(`${what} streams: ${by("completed")} completed, ${by("clear_error")} clear errors, ${by("lost")} lost`);
}

/** kill -9 while long prompts prefill. */
export const killWorkerPrefillCase: FaultCase = {
  name: "kill-worker-prefill",
  description: "kill -9 a worker while long prompts prefill: re-routed or a clear error, rank restarts",
  timeoutMs: (o) => (o.quick ? 120_000 : 240_000),
  async run(ctx) {
    const { prompt } = await promptOfTokens(ctx, ctx.options.quick ? 3000 : 5000, 11);
    const firsts: boolean[] = [];
    const streams = Array.from(
      { length: victimsCount(ctx) },
      (_, i) =>
        ctx.send(
          streamRequest(ctx, "prefill-victim", `${i} ${prompt}`, 8, { onFirstToken: () => void (firsts[i] = true) }),
        ),
    );
    // Kill once a rank is running one of them and none has produced its first token.
    const s = await ctx.watch.waitFor((m) => (m.sum(METRIC.running) ?? 0) > 0, 20_000);
    const inPrefill = streams.length - firsts.filter(Boolean).length;
    if (!s || inPrefill === 0) ctx.note("the long prompts were not seen in prefill before the kill");
    const fault = await signalWorker(ctx, await busiestRank(ctx));
    ctx.note(`killed with ${inPrefill} of ${streams.length} long prompts still before their first token`);
    await recoverFromWorkerFault(ctx, fault, "kill -9 in prefill");
    reportStreams(ctx, "prefill", await Promise.all(streams));
  },
};

/** kill -9 while streams decode. */
export const killWorkerDecodeCase: FaultCase = {
  name: "kill-worker-decode",
  description: "kill -9 a worker while its streams decode: they end with an error event and [DONE], rank restarts",
  timeoutMs: (o) => (o.quick ? 120_000 : 240_000),
  async run(ctx) {
    const rng = new SeededRandom(13);
    const n = victimsCount(ctx);
    let started = 0;
    const streams = Array.from(
      { length: n },
      () =>
        ctx.send(
          streamRequest(ctx, "decode-victim", promptText(rng, 40), ctx.options.quick ? 160 : 400, {
            onFirstToken: () => void started++,
          }),
        ),
    );
    const until = performance.now() + 30_000;
    while (started < n && performance.now() < until && !ctx.expired) await Bun.sleep(20);
    if (started < n) ctx.note(`only ${started} of ${n} streams had started decoding at the kill`);
    const fault = await signalWorker(ctx, await busiestRank(ctx));
    await recoverFromWorkerFault(ctx, fault, "kill -9 in decode");
    reportStreams(ctx, "decode", await Promise.all(streams));
  },
};

/** Words of each transfer wave's fresh prefix (over 30 blocks of 16 tokens). */
const PREFIX_WORDS = 600;
/** How long a seeded prefix is left to reach the control plane's page table before it is revisited. */
const PUBLISH_WAIT_MS = 500;

/**
 * One wave that makes KV move: a fresh prefix computed once on one rank, then (once the control
 * plane knows its blocks) `count` streams revisiting it, which round-robin routing spreads to the
 * ranks that lack it, so they pull it. Resolves with the wave's streams once they are sent.
 */
export async function transferWave(
  ctx: CaseContext,
  count: number,
  seed: number,
  more: (i: number) => Partial<OutgoingRequest> = () => ({}),
): Promise<Promise<RequestOutcome>[]> {
  const rng = new SeededRandom(seed);
  const prefix = promptText(rng, PREFIX_WORDS);
  await ctx.send(streamRequest(ctx, "prefix-seed", `${prefix} seed`, 2));
  await ctx.sleep(PUBLISH_WAIT_MS);
  return Array.from(
    { length: count },
    (_, i) => ctx.send(streamRequest(ctx, "shared-prefix", `${prefix} ${promptText(rng, 6)}`, 24, more(i))),
  );
}

/** kill -9 while KV transfers run. */
export const killWorkerTransferCase: FaultCase = {
  name: "kill-worker-transfer",
  description:
    "kill -9 a worker during KV transfers (--kv-transfers force): transfers abort, nothing lost, rank restarts",
  serverArgs: forcedTransferArgs,
  timeoutMs: (o) => (o.quick ? 120_000 : 240_000),
  async run(ctx) {
    const first = await ctx.watch.scrape();
    const transfersBefore = first?.value(METRIC.transfers) ?? 0;
    const streams: Promise<RequestOutcome>[] = [];
    const until = performance.now() + 20_000;
    let moved = false;
    for (let wave = 0; performance.now() < until && !ctx.expired && !moved; wave++) {
      streams.push(...(await transferWave(ctx, ctx.options.ranks * 2, 100 + wave)));
      const seen = await ctx.watch.waitFor((m) => (m.value(METRIC.transfers) ?? 0) > transfersBefore, 2000);
      moved = seen !== null;
    }
    if (!moved) {
      ctx.notRun("no KV transfer ran within 20 s of shared-prefix load (transfers between these ranks may be off)");
      await Promise.all(streams);
      return;
    }
    // Keep transfers coming while the rank dies.
    streams.push(...(await transferWave(ctx, ctx.options.ranks * 2, 999)));
    const fault = await signalWorker(ctx, await busiestRank(ctx));
    await recoverFromWorkerFault(ctx, fault, "kill -9 during transfers");
    reportStreams(ctx, "shared-prefix", await Promise.all(streams));
  },
};
