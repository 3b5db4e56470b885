/**
 * One simulated GPU whose compute its ranks share. Ranks of one device are separate processes with
 * separate CUDA contexts; the device time-slices between them, so while k ranks have a step on the
 * device each progresses at 1/k of the device's speed (processor sharing). A rank alone runs at full
 * speed: with one rank per GPU this is a plain delay.
 * @module
 */
import type { TimerHandle } from "../../lib/core/clock.ts";
import type { VirtualClock } from "../../lib/core/virtual_clock.ts";

interface DeviceJob {
  /** Device milliseconds of work left (at full speed). */
  left: number;
  done: () => void;
  /** Order of submission: ties in completion go to the earlier job. */
  seq: number;
}

/** Processor-sharing device time on a virtual clock. */
export class SharedGpu {
  readonly index: number;
  /** Device milliseconds of work completed (the busy time a utilisation figure divides). */
  busyMs = 0;
  readonly #clock: VirtualClock;
  readonly #jobs: DeviceJob[] = [];
  #last = 0;
  #timer: TimerHandle | undefined;
  #seq = 0;

  constructor(index: number, clock: VirtualClock) {
    this.index = index;
    this.#clock = clock;
  }

  /** Steps on the device now. */
  get active(): number {
    return this.#jobs.length;
  }

  /** Runs `workMs` of device work; `done` is called when it completed. */
  run(workMs: number, done: () => void): void {
    this.#advance();
    this.#jobs.push({ left: Math.max(0, workMs), done, seq: this.#seq++ });
    this.#arm();
  }

  /** Credits every job with the device time since the last change, shared equally. */
  #advance(): void {
    const now = this.#clock.now();
    const n = this.#jobs.length;
    if (n > 0 && now > this.#last) {
      const share = (now - this.#last) / n;
      for (const j of this.#jobs) j.left -= share;
      this.busyMs += now - this.#last;
    }
    this.#last = now;
  }

  #arm(): void {
    this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#jobs.length === 0) return;
    let first = this.#jobs[0]!;
    for (const j of this.#jobs) if (j.left < first.left || (j.left === first.left && j.seq < first.seq)) first = j;
    const wait = Math.max(0, first.left) * this.#jobs.length;
    this.#timer = this.#clock.setTimeout(() => this.#complete(), wait);
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
