/**
 * The figures of one fault case, as the table shows them: requests sent, completed, failed with a
 * clear error, lost (must be 0), leaked KV blocks (must be 0), time to detect, time to serve again
 * at full capacity; plus the case's own checks, and the verdict they make.
 * @module
 */
import type { Recovery } from "./recovery.ts";
import type { RequestOutcome } from "./request_outcome.ts";

/** One named pass/fail check of a case. */
export interface CaseCheck {
  name: string;
  ok: boolean;
  detail: string;
}

/** pass: every check held; fail: one did not; not run: the case could not set up its fault (it says why). */
export type CaseStatus = "pass" | "fail" | "not run";

/** One case's result. */
export interface CaseResult {
  name: string;
  description: string;
  status: CaseStatus;
  sent: number;
  completed: number;
  clearErrors: number;
  lost: number;
  /** Requests the client dropped on purpose (disconnect cases). */
  cancelled: number;
  /** Transport failures after the case killed the launcher itself: nothing could have saved them. */
  severed: number;
  /** Summed over ranks after the load drained; null when it could not be read (see leakNote). */
  leakedBlocks: number | null;
  leakNote: string;
  /** Every fault's recovery, in order (a case may inject several). */
  recoveries: Recovery[];
  checks: CaseCheck[];
  notes: string[];
  /** Up to five lost requests: what was sent and why it counts as lost. */
  lostExamples: string[];
  durationMs: number;
  /** The server's last output, kept when the case did not pass. */
  serverOutputTail?: string;
}

/** Counts of a list of outcomes; transport failures that ended at or after `severedFrom` count as severed. */
export function tallyOutcomes(
  outcomes: readonly RequestOutcome[],
  severedFrom: number | null = null,
): Pick<CaseResult, "sent" | "completed" | "clearErrors" | "lost" | "cancelled" | "severed" | "lostExamples"> {
  const t = {
    sent: outcomes.length,
    completed: 0,
    clearErrors: 0,
    lost: 0,
    cancelled: 0,
    severed: 0,
    lostExamples: [] as string[],
  };
  for (const o of outcomes) {
    if (o.kind === "completed") t.completed++;
    else if (o.kind === "clear_error") t.clearErrors++;
    else if (o.kind === "cancelled") t.cancelled++;
    else if (o.transport && severedFrom !== null && o.endAt >= severedFrom) t.severed++;
    else {
      t.lost++;
      if (t.lostExamples.length < 5) t.lostExamples.push(`${o.label}: ${o.detail}`);
    }
  }
  return t;
}

/** The verdict: not run when the case said so and nothing failed; fail when any check failed. */
export function verdict(checks: readonly CaseCheck[], notRun: string | null): CaseStatus {
  if (checks.some((c) => !c.ok)) return "fail";
  return notRun === null ? "pass" : "not run";
}
