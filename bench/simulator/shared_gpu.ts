/**
 * One simulated GPU whose compute its ranks share. Ranks of one device are separate processes with
 * separate CUDA contexts; the device time-slices between them, so while k ranks have a step on the
 * device each progresses at 1/k of the device's speed (processor sharing), slowed further by a
 * penalty for the switches between their contexts (measured on the one-GPU test bed, where short
 * decode steps of two processes interleave far worse than ideal sharing). A rank alone runs at full
 * speed: with one rank per GPU this is a plain delay.
 * @module
 */
import type { TimerHandle } from "../../lib/core/clock.ts";
import type { EventTimers } from "./event_timers.ts";

interface DeviceJob {
  /** Device milliseconds of work left (at full speed, alone). */
  left: number;
  done: () => void;
  /** Its slowdown beyond the fair share while others share the device. */
  penalty: number;
  /** Order of submission: ties in completion go to the earlier job. */
  seq: number;
}

/** Processor-sharing device time on a virtual clock. */
export class SharedGpu {
  readonly index: number;
  /** Device milliseconds of work completed (the busy time a utilisation figure divides). */
  busyMs = 0;
  readonly #timers: EventTimers;
  readonly #jobs: DeviceJob[] = [];
  #last = 0;
  #timer: TimerHandle | undefined;
  #seq = 0;

  constructor(index: number, timers: EventTimers) {
    this.index = index;
    this.#timers = timers;
  }

  /** Steps on the device now. */
  get active(): number {
    return this.#jobs.length;
  }

  /**
   * Runs `workMs` of device work; `done` is called when it completed. While other jobs share the
   * device it progresses at 1 / (jobs x `penalty`): switching between processes' contexts costs
   * time beyond the fair share (1: ideal sharing).
   */
  run(workMs: number, done: () => void, penalty = 1): void {
    this.#advance();
    this.#jobs.push({ left: Math.max(0, workMs), done, penalty, seq: this.#seq++ });
    this.#arm();
  }

  /** Credits every job with the device time since the last change, shared equally. */
  #advance(): void {
    const now = this.#timers.clock.now();
    const n = this.#jobs.length;
    if (n > 0 && now > this.#last) {
      const dt = now - this.#last;
      for (const j of this.#jobs) j.left -= dt / (n > 1 ? n * j.penalty : 1);
      this.busyMs += now - this.#last;
    }
    this.#last = now;
  }

  #arm(): void {
    this.#timers.cancel(this.#timer);
    this.#timer = undefined;
    if (this.#jobs.length === 0) return;
    const n = this.#jobs.length;
    const untilDone = (j: DeviceJob) => Math.max(0, j.left) * (n > 1 ? n * j.penalty : 1);
    let wait = Infinity;
    for (const j of this.#jobs) wait = Math.min(wait, untilDone(j));
    this.#timer = this.#timers.after(wait, () => this.#complete());
  }

  #complete(): void {
    this.#timer = undefined;
    this.#advance();
    // Rounding may leave a few nanoseconds: anything within a picosecond-scale tolerance is done.
    const finished = this.#jobs.filter((j) => j.left <= 1e-9);
    if (finished.length === 0) {
      this.#arm();
      return;
    }
    for (const j of finished) this.#jobs.splice(this.#jobs.indexOf(j), 1);
    this.#arm();
    for (const j of finished.sort((a, b) => a.seq - b.seq)) j.done();
  }
}
