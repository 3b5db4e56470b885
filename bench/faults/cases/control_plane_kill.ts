/**
 * kill -9 of the control plane under load: the supervisor starts a new one, which rebuilds the
 * page table from the workers; no request fails and the server is soon back at full capacity.
 * Detection is the new control-plane process (or /health leaving 200).
 * @module
 */
import type { FaultCase } from "../fault_case.ts";
import { findControlPlane } from "../process_tree.ts";
import { measureRecovery } from "../recovery.ts";
import { fmtMs } from "./worker_faults.ts";

/** The control-plane kill case. */
export const killControlPlaneCase: FaultCase = {
  name: "kill-control-plane",
  description: "kill -9 the control plane under load: restarted, no request fails, back at full capacity",
  timeoutMs: (o) => (o.quick ? 90_000 : 180_000),
  async run(ctx) {
    const pid = findControlPlane(ctx.server.pid);
    if (pid === null) throw new Error(`no control_main.ts process below the server (pid ${ctx.server.pid})`);
    ctx.server.rememberTree();
    const at = performance.now();
    if (!ctx.signal(pid, "SIGKILL")) throw new Error(`could not kill the control plane (pid ${pid})`);
    ctx.log(`SIGKILL control plane (pid ${pid})`);
    const replaced = () => {
      const now = findControlPlane(ctx.server.pid);
      return now !== null && now !== pid;
    };
    const r = await measureRecovery(
      ctx.watch,
      at,
      (_s, health) => (health !== null && health !== 200) || replaced(),
      ctx.options.recoveryTimeoutMs,
    );
    ctx.recovery(r);
    ctx.log(`detected ${fmtMs(r.detectMs)}, serving again ${fmtMs(r.serveAgainMs)}${r.note ? ` (${r.note})` : ""}`);
    ctx.check("a new control plane runs", replaced(), r.note);
    ctx.check("serves again on every rank", r.serveAgainMs !== null, r.note);
    await ctx.sleep(ctx.options.quick ? 2000 : 5000);
    const failed = ctx.load.outcomes.filter((o) => o.kind === "clear_error");
    ctx.check(
      "no request failed",
      failed.length === 0,
      failed.slice(0, 3).map((o) => `${o.label}: ${o.detail}`).join("; "),
    );
  },
};
