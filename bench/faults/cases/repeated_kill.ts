/**
 * kill -9 the same rank three times within a minute, each time once it serves again: every death
 * is detected and restarted, the restart counter counts three, and the restart backoff shows as a
 * growing time to serve again.
 * @module
 */
import type { FaultCase } from "../fault_case.ts";
import { restartsOf } from "../recovery.ts";
import { fmtMs, recoverFromWorkerFault, signalWorker } from "./worker_faults.ts";

const KILLS = 3;

/** The repeated-kill case. */
export const killWorkerRepeatedCase: FaultCase = {
  name: "kill-worker-3x",
  description:
    "kill -9 the same worker three times within a minute: three restarts, backoff visible in time to serve again",
  timeoutMs: (o) => (o.quick ? 150_000 : 240_000),
  async run(ctx) {
    const rank = ctx.options.ranks - 1;
    const restartsBefore = restartsOf(await ctx.watch.scrape(), rank);
    const first = performance.now();
    const times: (number | null)[] = [];
    for (let k = 1; k <= KILLS && !ctx.expired; k++) {
      const fault = await signalWorker(ctx, rank);
      const r = await recoverFromWorkerFault(ctx, fault, `kill ${k} of ${KILLS}`);
      times.push(r.serveAgainMs);
      if (r.serveAgainMs === null) break;
    }
    const span = performance.now() - first;
    ctx.note(
      `time to serve again per kill: ${times.map(fmtMs).join(" / ")}; all ${KILLS} kills within ${
        (span / 1000).toFixed(1)
      } s`,
    );
    if (span > 60_000) ctx.note("the kills spanned more than a minute: the backoff window may have reset between them");
    const restarts = restartsOf(await ctx.watch.scrape(), rank) - restartsBefore;
    ctx.check(
      `lmpool_worker_restarts_total{engine="${rank}"} counts ${KILLS}`,
      restarts === KILLS,
      `counted ${restarts}`,
    );
    const [a, , c] = times;
    ctx.check(
      "backoff visible: the last restart takes longer than the first",
      a != null && c != null && c > a,
      `times ${times.map(fmtMs).join(" / ")}`,
    );
  },
};
