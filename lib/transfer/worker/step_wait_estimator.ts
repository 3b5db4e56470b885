/**
 * How long a message waits for a busy worker. A worker whose steps hold its thread (the CPU
 * backend computes them in the call) reads control messages (transfer phases) only between steps,
 * so a message that arrives at a random moment while it
 * steps waits out the rest of the current step. A random moment lands in a step of length s with
 * probability proportional to s (length-biased sampling) and then waits s/2 on average, so the
 * expected residual is E[s^2] / (2 E[s]): s/2 for constant steps, more when long prefill steps mix
 * with short decode steps. Both moments are EWMAs over steps, so the estimate follows load changes.
 * @module
 */

/** EWMAs of step wall time and its square; the expected residual wait of a busy worker. */
export class StepWaitEstimator {
  readonly #alpha: number;
  #mean: number | undefined;
  #meanSq = 0;

  /** `alpha`: EWMA weight of a new step (0 < alpha <= 1; default 0.1, about the last 10 steps). */
  constructor(alpha = 0.1) {
    if (!(alpha > 0 && alpha <= 1)) throw new RangeError(`step wait EWMA alpha must be in (0, 1], got ${alpha}`);
    this.#alpha = alpha;
  }

  /** Folds in one step's wall time (ms). */
  observe(stepMs: number): void {
    if (!Number.isFinite(stepMs) || stepMs < 0) {
      throw new RangeError(`step time must be a finite ms >= 0, got ${stepMs}`);
    }
    if (this.#mean === undefined) {
      this.#mean = stepMs;
      this.#meanSq = stepMs * stepMs;
      return;
    }
    this.#mean += this.#alpha * (stepMs - this.#mean);
    this.#meanSq += this.#alpha * (stepMs * stepMs - this.#meanSq);
  }

  /** EWMA of step wall time (0 before any step). */
  get meanStepMs(): number {
    return this.#mean ?? 0;
  }

  /** Expected residual of the current step for a message arriving while busy: E[s^2] / (2 E[s]); 0 before any step. */
  get residualMs(): number {
    return this.#mean ? this.#meanSq / (2 * this.#mean) : 0;
  }

  /** What a worker reports: the residual while it steps, 0 while it has nothing to step (messages are read at once). */
  waitMs(busy: boolean): number {
    return busy ? this.residualMs : 0;
  }
}
