/**
 * Timers of the simulator's own synchronous events (steps, device completions, messages): they run
 * on the virtual clock like every timer, and say when one of them fired without handing work to
 * promise jobs, so the event pump can skip the turn of the host event loop it otherwise takes after
 * each event (a run fires millions of them). Whoever resolves a promise from such an event calls
 * `promised()`.
 * @module
 */
import type { TimerHandle } from "../../lib/core/clock.ts";
import type { VirtualClock } from "../../lib/core/virtual_clock.ts";

/** Synchronous-event timers over a virtual clock. */
export class EventTimers {
  readonly clock: VirtualClock;
  /** The last timer fired was one of these, and it resolved no promise. */
  #syncOnly = false;

  constructor(clock: VirtualClock) {
    this.clock = clock;
  }

  /** Runs `fn` after `ms` of virtual time. */
  after(ms: number, fn: () => void): TimerHandle {
    return this.clock.setTimeout(() => {
      this.#syncOnly = true;
      fn();
    }, ms);
  }

  /** Cancels a timer of {@link after}. */
  cancel(handle: TimerHandle | undefined): void {
    this.clock.clearTimeout(handle);
  }

  /** An event resolved a promise: its jobs must run before the next event. */
  promised(): void {
    this.#syncOnly = false;
  }

  /**
   * Fires the clock's next timer; returns "none" when none is pending, "sync" when it was one of
   * these and started no promise jobs, else "async".
   */
  fireNext(): "none" | "sync" | "async" {
    this.#syncOnly = false;
    if (!this.clock.fireNext()) return "none";
    return this.#syncOnly ? "sync" : "async";
  }
}
