/**
 * How a worker proves it is alive while it steps. A step computed on the worker's own thread (the
 * CPU backend) keeps heartbeats from going out while it runs, so the peers are told first how long
 * it may take (a busy heartbeat: protocol/heartbeat_monitor.ts). A step computed on the device
 * leaves the thread free and heartbeats flowing, so a step that never ends (a stuck kernel) is
 * caught by a watchdog instead. Both bounds follow the longest recent step.
 * @module
 */

/**
 * The least a step on this thread is announced as: the first step after idle has no measured
 * predecessor, and the announcement costs the peers' hang detection only a few times this much.
 */
const MIN_ANNOUNCED_STEP_MS = 250;
/** How fast the remembered longest recent step decays per step (it follows slower steps at once). */
const STEP_MS_DECAY = 0.9;
/** A device step past this many times the longest recent step means the device is stuck. */
const STEP_HANG_FACTOR = 50;
/** Floor of the step watchdog: covers first steps that build graphs and warm libraries. */
const MIN_STEP_HANG_MS = 20_000;

/** The step-time bounds of one worker. */
export class StepLiveness {
  #recentStepMs = 0;

  /** `stepsHoldThread`: steps run on this thread (no message is read meanwhile). */
  constructor(readonly stepsHoldThread: boolean) {}

  /** Longest recent step wall time, decaying. */
  get recentStepMs(): number {
    return this.#recentStepMs;
  }

  /** What to announce before a step on this thread (twice the longest recent step); none when steps leave it free. */
  announcementMs(): number | undefined {
    return this.stepsHoldThread ? Math.max(MIN_ANNOUNCED_STEP_MS, 2 * this.#recentStepMs) : undefined;
  }

  /** How long a device step may run before the device counts as stuck; none when steps hold this thread. */
  hangLimitMs(): number | undefined {
    return this.stepsHoldThread ? undefined : Math.max(MIN_STEP_HANG_MS, STEP_HANG_FACTOR * this.#recentStepMs);
  }

  /** Records a step's wall time. */
  observe(stepMs: number): void {
    this.#recentStepMs = Math.max(stepMs, this.#recentStepMs * STEP_MS_DECAY);
  }
}
