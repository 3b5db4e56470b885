/**
 * Restart decisions for the launcher's children (the control plane and every worker): one policy,
 * one ledger per child. A child that died is started again after a back-off that doubles with each
 * death in a row (from `initialDelayMs` up to `maxDelayMs`) and resets once the child has served
 * `healthyResetMs` without dying; more than `maxRestartsPerWindow` restarts within `windowMs` and
 * the child is given up on (it would only crash-loop). Time comes from an injected clock, so the
 * policy is tested without waiting.
 * @module
 */

/** How children are restarted. */
export interface RestartPolicy {
  /** Delay before the first restart after a healthy run (default 500 ms). */
  initialDelayMs: number;
  /** Upper bound of the doubling delay (default 30 s). */
  maxDelayMs: number;
  /** A child that served this long without dying starts again from `initialDelayMs` (default 60 s). */
  healthyResetMs: number;
  /** Restarts allowed within `windowMs` before the child is given up on (default 10). */
  maxRestartsPerWindow: number;
  /** Window of `maxRestartsPerWindow` (default 10 minutes). */
  windowMs: number;
}

/** Default restart policy: 0.5 s doubling to 30 s, reset after a minute of health, 10 per 10 minutes. */
const DEFAULT_RESTART_POLICY: Readonly<RestartPolicy> = Object.freeze({
  initialDelayMs: 500,
  maxDelayMs: 30_000,
  healthyResetMs: 60_000,
  maxRestartsPerWindow: 10,
  windowMs: 600_000,
});

/** What to do about a child that died. */
export type RestartDecision = { restart: true; delayMs: number; attempt: number } | { restart: false; why: string };

interface Ledger {
  /** Deaths in a row without a healthy run between them. */
  streak: number;
  /** When the current incarnation became ready (undefined while starting). */
  upSince: number | undefined;
  /** Times of recent restarts, oldest first. */
  restarts: number[];
  total: number;
}

/** Checks a policy's values; RangeError naming the field. */
function resolveRestartPolicy(p: Partial<RestartPolicy> = {}): RestartPolicy {
  const r = { ...DEFAULT_RESTART_POLICY, ...p };
  for (const [k, v] of Object.entries(r)) {
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
      throw new RangeError(`restart policy ${k} must be a finite number >= 0, got ${String(v)}`);
    }
  }
  if (r.maxDelayMs < r.initialDelayMs) {
    throw new RangeError(`restart policy maxDelayMs (${r.maxDelayMs}) must be >= initialDelayMs (${r.initialDelayMs})`);
  }
  if (!Number.isInteger(r.maxRestartsPerWindow)) {
    throw new RangeError(`restart policy maxRestartsPerWindow must be an integer, got ${r.maxRestartsPerWindow}`);
  }
  return r;
}

/** Restart ledgers of named children under one policy. */
export class Supervisor {
  readonly policy: RestartPolicy;
  readonly #now: () => number;
  readonly #children = new Map<string, Ledger>();
  readonly #policies = new Map<string, RestartPolicy>();

  constructor(policy: Partial<RestartPolicy> = {}, now: () => number = Date.now) {
    this.policy = resolveRestartPolicy(policy);
    this.#now = now;
  }

  /** Gives one child its own policy values (e.g. a shorter first delay for a child that starts fast). */
  override(child: string, policy: Partial<RestartPolicy>): this {
    this.#policies.set(child, resolveRestartPolicy({ ...this.policy, ...policy }));
    return this;
  }

  /** The child serves (ready): its healthy run starts now. */
  up(child: string): void {
    this.#ledger(child).upSince = this.#now();
  }

  /** The child died: whether and when to start it again. Counts the restart when it says yes. */
  died(child: string): RestartDecision {
    const l = this.#ledger(child);
    const p = this.#policies.get(child) ?? this.policy;
    const now = this.#now();
    if (l.upSince !== undefined && now - l.upSince >= p.healthyResetMs) l.streak = 0;
    l.upSince = undefined;
    while (l.restarts.length > 0 && now - l.restarts[0]! > p.windowMs) l.restarts.shift();
    if (l.restarts.length >= p.maxRestartsPerWindow) {
      return { restart: false, why: `${l.restarts.length} restarts within ${Math.round(p.windowMs / 1000)} s` };
    }
    const delayMs = Math.min(p.maxDelayMs, p.initialDelayMs * 2 ** l.streak);
    l.streak++;
    l.restarts.push(now);
    l.total++;
    return { restart: true, delayMs, attempt: l.total };
  }

  /** Restarts of `child` so far. */
  restarts(child: string): number {
    return this.#children.get(child)?.total ?? 0;
  }

  #ledger(child: string): Ledger {
    let l = this.#children.get(child);
    if (!l) this.#children.set(child, l = { streak: 0, upSince: undefined, restarts: [], total: 0 });
    return l;
  }
}
