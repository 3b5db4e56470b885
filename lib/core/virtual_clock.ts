/**
 * A {@link Clock} whose time moves only when its owner says so: the cluster simulator runs the
 * control plane on it, and unit tests let deadlines pass without waiting. Timers fire in order of
 * due time, ties in the order they were set, so a run is the same every time.
 * @module
 */
import type { Clock, TimerHandle } from "./clock.ts";

interface VirtualTimer {
  id: number;
  due: number;
  fn: () => void;
  /** Repeat period (setInterval), or undefined for a one-shot timer. */
  every?: number;
}

/** Lets the promise jobs a fired timer started run, before the next timer fires. */
const settleJobs: () => Promise<void> = typeof setImmediate === "function"
  ? () => new Promise((r) => setImmediate(r))
  : () => new Promise((r) => globalThis.setTimeout(r, 0));

/** Options of a {@link VirtualClock}. */
export interface VirtualClockOptions {
  /** `now()` at the start (default 0). */
  startMs?: number;
  /** Epoch ms at which `now()` reads 0 (default 0): `wallNow()` is `timeOrigin + now()`. */
  timeOrigin?: number;
}

/**
 * A clock advanced by hand; see the module doc. A timer's `keepsAlive` option has no meaning here
 * (virtual timers never hold a process open), so the timer methods take none.
 */
export class VirtualClock implements Clock {
  readonly timeOrigin: number;
  #now: number;
  #nextId = 1;
  /** Pending timers, by id (a timer's handle is its id). */
  readonly #timers = new Map<number, VirtualTimer>();

  constructor(options: VirtualClockOptions = {}) {
    this.#now = options.startMs ?? 0;
    this.timeOrigin = options.timeOrigin ?? 0;
    if (!Number.isFinite(this.#now)) throw new RangeError(`VirtualClock startMs must be finite, got ${this.#now}`);
    if (!Number.isFinite(this.timeOrigin)) {
      throw new RangeError(`VirtualClock timeOrigin must be finite, got ${this.timeOrigin}`);
    }
  }

  now(): number {
    return this.#now;
  }

  wallNow(): number {
    return this.timeOrigin + this.#now;
  }

  /** Timers set and not yet fired or cleared. */
  get pendingTimers(): number {
    return this.#timers.size;
  }

  /** When the next timer is due, or undefined when none is pending. */
  nextDue(): number | undefined {
    return this.#next()?.due;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    return this.#add(fn, ms, undefined);
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (handle !== undefined) this.#timers.delete(handle as unknown as number);
  }

  setInterval(fn: () => void, ms: number): TimerHandle {
    return this.#add(fn, ms, Math.max(1, delayOf(ms)));
  }

  clearInterval(handle: TimerHandle | undefined): void {
    this.clearTimeout(handle);
  }

  /**
   * Moves time to the next timer's due time and fires it (synchronously); false when none is
   * pending. For a driver that runs the promise jobs itself between events.
   */
  fireNext(): boolean {
    const t = this.#next();
    if (!t) return false;
    this.#now = Math.max(this.#now, t.due);
    if (t.every === undefined) this.#timers.delete(t.id);
    else t.due += t.every;
    t.fn();
    return true;
  }

  /**
   * Moves time forward by `ms`, firing every timer due on the way in order, synchronously: the
   * promise jobs they start run only after this returns. For code without awaits between timers.
   */
  advanceSync(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`VirtualClock.advanceSync takes ms >= 0, got ${ms}`);
    const t = this.#now + ms;
    for (let next = this.#next(); next && next.due <= t; next = this.#next()) this.fireNext();
    this.#now = t;
  }

  /**
   * Moves time forward by `ms`, firing every timer due on the way in order; after each, the promise
   * jobs it started run (a rejected race, the code awaiting it) before time moves on.
   */
  async advance(ms: number): Promise<void> {
    if (!(ms >= 0)) throw new RangeError(`VirtualClock.advance takes ms >= 0, got ${ms}`);
    await this.advanceTo(this.#now + ms);
  }

  /** As {@link advance}, to the absolute time `t` (no-op when `t` is not ahead of now). */
  async advanceTo(t: number): Promise<void> {
    if (Number.isNaN(t)) throw new RangeError("VirtualClock.advanceTo takes a number, got NaN");
    await settleJobs();
    for (let next = this.#next(); next && next.due <= t; next = this.#next()) {
      this.fireNext();
      await settleJobs();
    }
    this.#now = Math.max(this.#now, t);
  }

  #add(fn: () => void, ms: number, every: number | undefined): TimerHandle {
    const id = this.#nextId++;
    this.#timers.set(id, { id, due: this.#now + delayOf(ms), fn, every });
    return id as unknown as TimerHandle;
  }

  /** The earliest due timer; ties go to the one set first. */
  #next(): VirtualTimer | undefined {
    let best: VirtualTimer | undefined;
    for (const t of this.#timers.values()) {
      if (!best || t.due < best.due || (t.due === best.due && t.id < best.id)) best = t;
    }
    return best;
  }
}

/** A timer's delay as the host's timers take it: not a number or negative counts as 0. */
function delayOf(ms: number): number {
  return Number.isFinite(ms) && ms > 0 ? ms : 0;
}
