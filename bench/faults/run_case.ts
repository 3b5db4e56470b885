/**
 * Runs one fault case against a fresh server: start it (`examples/serve.ts --gpus G --backend B
 * --port 0` plus the case's flags), wait until every worker runs and a probe answers, start the
 * background load, let it warm up, run the case's fault within its time bound, stop the load, then
 * (while the server lives) wait for the work to drain and read the leaked blocks. The server and
 * every process it started are stopped at the end, whatever happened (SIGTERM, a short grace,
 * then SIGKILL), and the socket directory it may leave is removed.
 * @module
 */
import { settlesWithin } from "../../lib/core/clock.ts";
import { type CaseCheck, type CaseResult, tallyOutcomes, verdict } from "./case_result.ts";
import type { CaseContext, FaultCase } from "./fault_case.ts";
import { LoadGenerator } from "./load.ts";
import type { FaultsOptions } from "./options.ts";
import { findWorkers, signalPid } from "./process_tree.ts";
import type { Recovery } from "./recovery.ts";
import type { RequestOutcome } from "./request_outcome.ts";
import { sendClassified } from "./request_outcome.ts";
import { LaunchedServer } from "./server_process.ts";
import { ServerWatch } from "./server_watch.ts";

/** The server flags every case starts with. */
export function baseServerArgs(o: FaultsOptions): string[] {
  return ["--gpus", o.gpus, "--backend", o.backend, "--port", "0", ...(o.model ? ["--model", o.model] : [])];
}

/** Waits until every rank has a worker process and a probe answers; a reason string otherwise. */
async function waitReady(server: LaunchedServer, watch: ServerWatch, o: FaultsOptions): Promise<string | null> {
  const deadline = performance.now() + o.startTimeoutMs;
  while (performance.now() < deadline) {
    const ranks = new Set(findWorkers(server.pid).map((w) => w.rank));
    if (ranks.size >= o.ranks && (await watch.probe(5000))) return null;
    if (server.exitCode !== null) return `server exited with ${server.exitCode}`;
    await Bun.sleep(200);
  }
  return `not ${o.ranks} workers and an answered probe within ${o.startTimeoutMs} ms (workers: ${
    JSON.stringify(findWorkers(server.pid))
  })`;
}

/** Runs `c` once; never throws (a harness failure becomes a failed check). */
export async function runCase(
  c: FaultCase,
  o: FaultsOptions,
  log: (line: string) => void = console.log,
): Promise<CaseResult> {
  const started = performance.now();
  const checks: CaseCheck[] = [];
  const notes: string[] = [];
  const recoveries: Recovery[] = [];
  const own: RequestOutcome[] = [];
  let notRun: string | null = null;
  let severedFrom: number | null = null;
  let expired = false;
  let leakedBlocks: number | null = null;
  let leakNote = "";
  let server: LaunchedServer | undefined;
  let load: LoadGenerator | undefined;
  const check = (name: string, ok: boolean, detail = "") => void checks.push({ name, ok, detail });
  log(`\n== ${c.name}: ${c.description}`);
  try {
    server = await LaunchedServer.start([...baseServerArgs(o), ...(c.serverArgs?.(o) ?? [])], o.startTimeoutMs);
    const watch = new ServerWatch(server.url, server.modelName, o.ranks);
    const notReady = await waitReady(server, watch, o);
    if (notReady !== null) throw new Error(`server not ready: ${notReady}`);
    server.rememberTree();
    const concurrency = c.concurrency?.(o) ?? o.concurrency;
    load = new LoadGenerator({ baseUrl: server.url, model: server.modelName, concurrency, deadlineMs: o.deadlineMs });
    load.start();
    const warm = performance.now() + (o.quick ? 1500 : 4000);
    while (performance.now() < warm && load.completed() < concurrency) await Bun.sleep(50);
    const live = server;
    const liveLoad = load;
    const ctx: CaseContext = {
      options: o,
      server: live,
      watch,
      load: liveLoad,
      get expired() {
        return expired;
      },
      log: (line) => log(`  ${c.name}: ${line}`),
      send: async (req) => {
        const r = await sendClassified(live.url, req);
        own.push(r);
        return r;
      },
      check,
      note: (t) => void notes.push(t),
      recovery: (r) => void recoveries.push(r),
      notRun: (reason) => void (notRun = reason),
      launcherKilledAt: (at) => void (severedFrom = at),
      signal: (pid, sig) => !expired && signalPid(pid, sig),
      sleep: async (ms) => {
        const until = performance.now() + ms;
        while (!expired && performance.now() < until) await Bun.sleep(Math.min(100, until - performance.now()));
      },
    };
    const ran = c.run(ctx).then(() => null, (e: unknown) => ({ error: e }));
    if (!(await settlesWithin(ran, c.timeoutMs(o)))) {
      expired = true;
      check("case ends within its time bound", false, `still running after ${c.timeoutMs(o)} ms`);
    } else {
      const failed = await ran;
      if (failed !== null) {
        const e = failed.error;
        check("case runs without a harness error", false, e instanceof Error ? e.message : String(e));
      }
    }
    await load.stop();
    if (severedFrom === null && server.exitCode === null) {
      const drain = await watch.leakedAfterDrain(o.quick ? 20_000 : 60_000);
      leakedBlocks = drain.leaked;
      leakNote = drain.reason;
      check("work drains after the case", drain.drained, drain.reason);
      check(
        "no leaked KV blocks",
        drain.leaked === 0,
        drain.leaked === null ? drain.reason : `${drain.leaked} blocks still referenced with no work`,
      );
      check("serves a probe after the case", await watch.probe(10_000), "a short completion after the case");
    } else leakNote = "n/a: the launcher exited (the case stopped it)";
  } catch (e) {
    check("harness", false, e instanceof Error ? e.message : String(e));
  } finally {
    expired = true;
    await load?.stop();
    await server?.stop();
  }
  const tally = tallyOutcomes([...(load?.outcomes ?? []), ...own], severedFrom);
  checks.push({
    name: "no request lost",
    ok: tally.lost === 0,
    detail: tally.lost === 0 ? "" : `${tally.lost} lost, e.g. ${tally.lostExamples.join("; ")}`,
  });
  const status = verdict(checks, notRun);
  if (notRun !== null) notes.push(`not run: ${notRun}`);
  const result: CaseResult = {
    name: c.name,
    description: c.description,
    status,
    ...tally,
    leakedBlocks,
    leakNote,
    recoveries,
    checks,
    notes,
    durationMs: performance.now() - started,
    ...(status === "pass" || !server ? {} : { serverOutputTail: server.outputTail(3000) }),
  };
  log(
    `  ${c.name}: ${status}${
      status === "fail" ? ` (${checks.filter((x) => !x.ok).map((x) => `${x.name}: ${x.detail}`).join("; ")})` : ""
    }`,
  );
  return result;
}
