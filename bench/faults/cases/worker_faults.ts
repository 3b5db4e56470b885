/**
 * What several cases share: which rank to hit, killing or stopping one worker and measuring how
 * the server comes back, the check that no worker died (for cases where none may), and prompts
 * of a measured token length.
 * @module
 */
import { completionBody, promptText } from "../load.ts";
import { SeededRandom } from "../../workloads/prng.ts";
import type { CaseContext } from "../fault_case.ts";
import { findWorkers, type WorkerProcess } from "../process_tree.ts";
import { measureRecovery, type Recovery, restartsOf, workerDownTest } from "../recovery.ts";
import type { OutgoingRequest } from "../request_outcome.ts";
import { METRIC } from "../server_watch.ts";

/** The rank running the most requests now (rank 0 when none runs or /metrics is silent). */
export async function busiestRank(ctx: CaseContext): Promise<number> {
  const s = await ctx.watch.scrape();
  let best = 0;
  let most = -1;
  for (let r = 0; r < ctx.options.ranks; r++) {
    const n = s?.value(METRIC.running, { engine: String(r) }) ?? 0;
    if (n > most) [best, most] = [r, n];
  }
  return best;
}

/** The worker process of `rank`; an Error naming the rank when there is none. */
function workerOf(ctx: CaseContext, rank: number): WorkerProcess {
  const w = findWorkers(ctx.server.pid).find((x) => x.rank === rank);
  if (!w) throw new Error(`no worker process for rank ${rank} below the server (pid ${ctx.server.pid})`);
  return w;
}

/** One injected worker fault: when, which process, and its restart count before. */
export interface WorkerFault {
  rank: number;
  victimPid: number;
  restartsBefore: number;
  at: number;
}

/** Sends `signal` (default SIGKILL) to `rank`'s worker. */
export async function signalWorker(
  ctx: CaseContext,
  rank: number,
  signal: NodeJS.Signals = "SIGKILL",
): Promise<WorkerFault> {
  const restartsBefore = restartsOf(await ctx.watch.scrape(), rank);
  const w = workerOf(ctx, rank);
  ctx.server.rememberTree();
  const at = performance.now();
  if (!ctx.signal(w.pid, signal)) throw new Error(`could not send ${signal} to worker ${rank} (pid ${w.pid})`);
  ctx.log(`${signal} worker ${rank} (pid ${w.pid})`);
  return { rank, victimPid: w.pid, restartsBefore, at };
}

/** Measures detection and return to full capacity after `f`; records the recovery and its checks. */
export async function recoverFromWorkerFault(ctx: CaseContext, f: WorkerFault, what: string): Promise<Recovery> {
  const test = workerDownTest(ctx.watch, ctx.server.pid, f.rank, f.victimPid, f.restartsBefore);
  const r = await measureRecovery(ctx.watch, f.at, test, ctx.options.recoveryTimeoutMs);
  ctx.recovery(r);
  ctx.check(`${what}: rank ${f.rank} detected down`, r.detectMs !== null, r.note);
  ctx.check(`${what}: serves again on ${ctx.options.ranks} ranks`, r.serveAgainMs !== null, r.note);
  ctx.log(
    `${what}: detected ${fmtMs(r.detectMs)}, serving again ${fmtMs(r.serveAgainMs)}${r.note ? ` (${r.note})` : ""}`,
  );
  return r;
}

/** "1.23 s" or "-". */
export function fmtMs(ms: number | null): string {
  return ms === null ? "-" : `${(ms / 1000).toFixed(2)} s`;
}

/** The worker pids and restart counts now, to compare after a case where no worker may die. */
export async function workerBaseline(ctx: CaseContext): Promise<{ pids: string; restarts: number[] }> {
  const s = await ctx.watch.scrape();
  const pids = findWorkers(ctx.server.pid).map((w) => `${w.rank}:${w.pid}`).join(",");
  return { pids, restarts: Array.from({ length: ctx.options.ranks }, (_, r) => restartsOf(s, r)) };
}

/** Checks that no worker died or restarted since `before`, and that every rank reports up. */
export async function checkNoWorkerDied(ctx: CaseContext, before: { pids: string; restarts: number[] }): Promise<void> {
  const after = await workerBaseline(ctx);
  ctx.check(
    "no worker died (same worker processes)",
    after.pids === before.pids,
    `before ${before.pids}, after ${after.pids}`,
  );
  ctx.check(
    "no worker restarted",
    after.restarts.every((n, r) => n === before.restarts[r]),
    `restarts before ${before.restarts}, after ${after.restarts}`,
  );
  const s = await ctx.watch.scrape();
  const up = s?.value(METRIC.healthyRanks);
  ctx.check(
    "every rank reports up",
    up === ctx.options.ranks,
    up === undefined ? `/metrics has no ${METRIC.healthyRanks}` : `${METRIC.healthyRanks} = ${up}`,
  );
}

/** Checks that every load request of the case completed (none failed, not even clearly). */
export function checkLoadUnharmed(ctx: CaseContext): void {
  const failed = ctx.load.outcomes.filter((o) => o.kind !== "completed");
  ctx.check(
    "every other request completes",
    failed.length === 0,
    failed.slice(0, 3).map((o) => `${o.label}: ${o.kind} ${o.detail}`).join("; "),
  );
}

/** Plain text of about `tokens` tokens by the server's tokenizer (measured with /tokenize), and its count. */
export async function promptOfTokens(
  ctx: CaseContext,
  tokens: number,
  seed = 7,
): Promise<{ prompt: string; count: number; maxModelLen: number }> {
  const rng = new SeededRandom(seed);
  let words = tokens;
  let last = { prompt: "", count: 0, maxModelLen: 0 };
  for (let i = 0; i < 4; i++) {
    const prompt = promptText(rng, words);
    const res = await fetch(`${ctx.server.url}/tokenize`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: ctx.server.modelName, prompt }),
      signal: AbortSignal.timeout(30_000),
    });
    if (res.status !== 200) throw new Error(`/tokenize answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
    const j = (await res.json()) as { count: number; max_model_len: number };
    last = { prompt, count: j.count, maxModelLen: j.max_model_len };
    if (Math.abs(j.count - tokens) <= tokens * 0.03) break;
    words = Math.max(1, Math.round(words * (tokens / j.count)));
  }
  return last;
}

/** A streamed /v1/completions request of the case (label, prompt, output length, extra fields). */
export function streamRequest(
  ctx: CaseContext,
  label: string,
  prompt: string,
  maxTokens: number,
  more: Partial<OutgoingRequest> = {},
): OutgoingRequest {
  return {
    label,
    path: "/v1/completions",
    body: completionBody(ctx.server.modelName, prompt, maxTokens, true),
    stream: true,
    deadlineMs: ctx.options.deadlineMs,
    ...more,
  };
}
