/**
 * The launcher's own signals under load. SIGTERM: a bounded drain (exit 0 within --drain-timeout
 * and a margin), every stream ending with [DONE] (finished, or an error event when the drain
 * timed out), the socket directory removed, no child left. SIGKILL: no orphan process remains
 * (the workers and control plane notice their parent's death), and the next start removes the
 * stale socket directory.
 * @module
 */
import { existsSync } from "node:fs";
import type { CaseContext, FaultCase } from "../fault_case.ts";
import type { FaultsOptions } from "../options.ts";
import { findWorkers, type ProcessInfo, survivors } from "../process_tree.ts";
import { LaunchedServer } from "../server_process.ts";
import { baseServerArgs } from "../run_case.ts";
import { SeededRandom } from "../../workloads/prng.ts";
import { promptText } from "../load.ts";
import { streamRequest } from "./worker_faults.ts";

/** --drain-timeout of the SIGTERM case, in seconds. */
export function drainSeconds(o: FaultsOptions): number {
  return o.quick ? 4 : 10;
}

/** How long past the drain timeout the launcher may take to exit. */
const EXIT_MARGIN_MS = 10_000;
/** How long orphans may take to notice their parent's death. */
const ORPHAN_GRACE_MS = 10_000;

function socketDirOf(ctx: CaseContext): string | null {
  return findWorkers(ctx.server.pid).find((w) => w.socketDir !== null)?.socketDir ?? null;
}

async function waitNoSurvivors(tree: ProcessInfo[], ms: number): Promise<ProcessInfo[]> {
  const until = performance.now() + ms;
  let left = survivors(tree);
  while (left.length > 0 && performance.now() < until) {
    await Bun.sleep(100);
    left = survivors(tree);
  }
  return left;
}

const describe = (ps: ProcessInfo[]) => ps.map((p) => `${p.pid} ${p.cmdline.slice(0, 80)}`).join("; ");

/** SIGTERM under load. */
export const launcherSigtermCase: FaultCase = {
  name: "launcher-sigterm",
  description:
    "SIGTERM the launcher under load: exits 0 within --drain-timeout + margin, streams end with [DONE], socket dir removed",
  serverArgs: (o) => ["--drain-timeout", String(drainSeconds(o))],
  timeoutMs: (o) => drainSeconds(o) * 1000 + EXIT_MARGIN_MS + 60_000,
  async run(ctx) {
    const dir = socketDirOf(ctx);
    const tree = ctx.server.rememberTree();
    // Streams long enough to outlast the drain, so its bound is what ends them.
    const rng = new SeededRandom(23);
    const long = Array.from(
      { length: ctx.options.ranks * 2 },
      () => ctx.send(streamRequest(ctx, "outlasts-drain", promptText(rng, 30), 4000)),
    );
    await ctx.sleep(1000);
    const loadStopped = ctx.load.stop();
    const at = performance.now();
    ctx.signal(ctx.server.pid, "SIGTERM");
    ctx.log(`SIGTERM launcher (pid ${ctx.server.pid}), --drain-timeout ${drainSeconds(ctx.options)}`);
    const bound = drainSeconds(ctx.options) * 1000 + EXIT_MARGIN_MS;
    const code = await ctx.server.waitExit(bound);
    const took = performance.now() - at;
    ctx.note(`exited with ${code} after ${(took / 1000).toFixed(1)} s`);
    ctx.check(
      `exits 0 within --drain-timeout + ${EXIT_MARGIN_MS / 1000} s`,
      code === 0,
      code === null ? `still running after ${bound} ms` : `exit code ${code} after ${Math.round(took)} ms`,
    );
    await Promise.all([loadStopped, ...long]);
    const left = await waitNoSurvivors(tree, 5000);
    ctx.check("no child process left", left.length === 0, describe(left));
    ctx.check(
      "socket directory removed",
      dir !== null && !existsSync(dir),
      dir === null ? "no socket directory found in the worker command lines" : `${dir} still exists`,
    );
  },
};

/** SIGKILL under load. */
export const launcherSigkillCase: FaultCase = {
  name: "launcher-sigkill",
  description:
    "SIGKILL the launcher under load: no orphan processes remain; the next start removes the stale socket directory",
  timeoutMs: (o) => ORPHAN_GRACE_MS + o.startTimeoutMs + 30_000,
  async run(ctx) {
    const dir = socketDirOf(ctx);
    const tree = ctx.server.rememberTree();
    const at = performance.now();
    ctx.launcherKilledAt(at);
    ctx.signal(ctx.server.pid, "SIGKILL");
    ctx.log(`SIGKILL launcher (pid ${ctx.server.pid}); watching ${tree.length} children`);
    await ctx.load.stop();
    const left = await waitNoSurvivors(tree, ORPHAN_GRACE_MS);
    ctx.check(`no orphan process within ${ORPHAN_GRACE_MS / 1000} s`, left.length === 0, describe(left));
    if (left.length === 0) ctx.note(`children gone ${((performance.now() - at) / 1000).toFixed(1)} s after the kill`);
    if (dir === null) {
      ctx.check(
        "stale socket directory removed by the next start",
        false,
        "no socket directory found in the worker command lines",
      );
      return;
    }
    const next = await LaunchedServer.start(baseServerArgs(ctx.options), ctx.options.startTimeoutMs);
    try {
      ctx.check(
        "stale socket directory removed by the next start",
        !existsSync(dir),
        `${dir} still exists after a new server started`,
      );
    } finally {
      await next.stop();
    }
  },
};
