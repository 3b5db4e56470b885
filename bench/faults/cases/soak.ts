/**
 * The soak: load for --soak-minutes with a kill -9 of a random worker every minute (every 20 s
 * with --quick). Every kill is recovered from, nothing is lost, no block leaks at the end, and
 * memory stays flat: the launcher's and control plane's resident memory at the end against the
 * start (workers are replaced by the kills, so theirs is reported, not judged).
 * @module
 */
import type { CaseContext, FaultCase } from "../fault_case.ts";
import { findControlPlane, findWorkers, rssKiB } from "../process_tree.ts";
import { SeededRandom } from "../../workloads/prng.ts";
import { recoverFromWorkerFault, signalWorker } from "./worker_faults.ts";

/** Memory that may grow over the soak before it counts as not flat: a ratio and an allowance. */
const RSS_GROWTH_RATIO = 1.5;
const RSS_ALLOWANCE_KIB = 64 * 1024;

interface RssSample {
  launcher: number | null;
  controlPlane: number | null;
  workers: number;
}

function sampleRss(ctx: CaseContext): RssSample {
  const cp = findControlPlane(ctx.server.pid);
  return {
    launcher: rssKiB(ctx.server.pid),
    controlPlane: cp === null ? null : rssKiB(cp),
    workers: findWorkers(ctx.server.pid).reduce((a, w) => a + (rssKiB(w.pid) ?? 0), 0),
  };
}

const mib = (kib: number | null) => (kib === null ? "-" : `${(kib / 1024).toFixed(0)} MiB`);

function checkFlat(ctx: CaseContext, what: string, start: number | null, end: number | null): void {
  const ok = start !== null && end !== null && end <= start * RSS_GROWTH_RATIO + RSS_ALLOWANCE_KIB;
  ctx.check(`${what} memory flat`, ok, `${mib(start)} -> ${mib(end)}`);
}

/** The soak case. */
export const soakCase: FaultCase = {
  name: "soak",
  description:
    "load for --soak-minutes with kill -9 of a random worker every minute: all recovered, memory flat, no leaks",
  timeoutMs: (o) => o.soakMinutes * 60_000 + o.recoveryTimeoutMs + 60_000,
  async run(ctx) {
    const o = ctx.options;
    const start = sampleRss(ctx);
    const rng = new SeededRandom(53);
    const end = performance.now() + o.soakMinutes * 60_000;
    let kills = 0;
    while (!ctx.expired) {
      const next = performance.now() + o.soakKillEverySec * 1000;
      if (next > end) break;
      await ctx.sleep(next - performance.now());
      const fault = await signalWorker(ctx, rng.int(0, o.ranks - 1));
      kills++;
      await recoverFromWorkerFault(ctx, fault, `soak kill ${kills}`);
    }
    await ctx.sleep(end - performance.now());
    const finish = sampleRss(ctx);
    ctx.note(
      `${kills} kills over ${o.soakMinutes} min; RSS launcher ${mib(start.launcher)} -> ${
        mib(finish.launcher)
      }, control plane ${mib(start.controlPlane)} -> ${mib(finish.controlPlane)}, workers ${mib(start.workers)} -> ${
        mib(finish.workers)
      }`,
    );
    ctx.check("at least one kill", kills > 0, `soak of ${o.soakMinutes} min with a kill every ${o.soakKillEverySec} s`);
    checkFlat(ctx, "launcher", start.launcher, finish.launcher);
    checkFlat(ctx, "control plane", start.controlPlane, finish.controlPlane);
  },
};
