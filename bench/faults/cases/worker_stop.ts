/**
 * SIGSTOP one worker (a hang the process cannot report), then SIGCONT after the stop period: the
 * hang is detected while it lasts (liveness apart from work), the rank is replaced, the requests
 * it held end with a clear error or go to a live rank, and the server returns to full capacity.
 * @module
 */
import type { FaultCase } from "../fault_case.ts";
import { isAlive } from "../process_tree.ts";
import { busiestRank, recoverFromWorkerFault, signalWorker } from "./worker_faults.ts";

/** How long the worker stays stopped, in seconds (--quick too): longer than the hang bound, or the check means nothing. */
const STOP_SECONDS = 10;

/** The SIGSTOP case. */
export const stopWorkerCase: FaultCase = {
  name: "stop-worker",
  description: "SIGSTOP a worker 10 s then SIGCONT: hang detected while stopped, rank replaced, full capacity again",
  timeoutMs: (o) => (o.quick ? 120_000 : 240_000),
  async run(ctx) {
    const stopMs = STOP_SECONDS * 1000;
    const fault = await signalWorker(ctx, await busiestRank(ctx), "SIGSTOP");
    const recovered = recoverFromWorkerFault(ctx, fault, `SIGSTOP ${stopMs / 1000} s`);
    await ctx.sleep(stopMs);
    if (isAlive(fault.victimPid)) {
      ctx.signal(fault.victimPid, "SIGCONT");
      ctx.log(`SIGCONT pid ${fault.victimPid}`);
    } else ctx.note(`the stopped worker (pid ${fault.victimPid}) was gone before SIGCONT`);
    const r = await recovered;
    ctx.check(
      "hang detected while the worker was stopped",
      r.detectMs !== null && r.detectMs <= stopMs,
      `detected after ${r.detectMs === null ? "never" : `${Math.round(r.detectMs)} ms`}, stopped ${stopMs} ms`,
    );
  },
};
