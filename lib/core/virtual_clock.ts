/**
 * A {@link Clock} whose time moves only when its owner says so: the cluster simulator runs the
 * control plane on it, and unit tests let deadlines pass without waiting. Timers fire in order of
 * due time, ties in the order they were set, so a run is the same every time. Pending timers sit
 * in a binary heap (a simulation keeps thousands of them: one per step in flight and per arrival);
 * a timer is its own handle and heap entry, and a cleared one is dropped lazily when it reaches the
 * top, so setting and clearing a timer costs no lookup.
 * @module
 */
import type { Clock, TimerHandle } from "./clock.ts";

interface VirtualTimer {
  /** Order of setting: ties in due time fire in it. */
  id: number;
  due: number;
  fn: () => void;
  /** Repeat period (setInterval), or undefined for a one-shot timer. */
  every: number | undefined;
  /** Fired (one-shot) or cleared: its heap entry is stale. */
  done: boolean;
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
  #pending = 0;
  /** Min-heap of timers by (due, id); done ones are stale until they reach the top. */
  readonly #heap: VirtualTimer[] = [];

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
    return this.#pending;
  }

  /** When the next timer is due, or undefined when none is pending. */
  nextDue(): number | undefined {
    return this.#next()?.due;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    return this.#add(fn, ms, undefined);
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    const t = handle as unknown as VirtualTimer | undefined;
    if (t === undefined || t.done) return;
    t.done = true;
    this.#pending--;
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
    this.#pop();
    if (t.every === undefined) {
      t.done = true;
      this.#pending--;
    } else {
      t.due += t.every;
      this.#push(t);
    }
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
    const t: VirtualTimer = { id: this.#nextId++, due: this.#now + delayOf(ms), fn, every, done: false };
    this.#pending++;
    this.#push(t);
    return t as unknown as TimerHandle;
  }

  /** The earliest due timer; ties go to the one set first. Drops stale heap entries on the way. */
  #next(): VirtualTimer | undefined {
    const h = this.#heap;
    while (h.length > 0) {
      const top = h[0]!;
      if (!top.done) return top;
      this.#pop();
    }
    return undefined;
  }

  #push(e: VirtualTimer): void {
    const h = this.#heap;
    let i = h.length;
    h.push(e);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(e, h[p]!)) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = e;
  }

  #pop(): void {
    const h = this.#heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const r = l + 1;
      const c = r < h.length && before(h[r]!, h[l]!) ? r : l;
      if (!before(h[c]!, last)) break;
      h[i] = h[c]!;
      i = c;
    }
    h[i] = last;
  }
}

/** Heap order: earlier due first, then the timer set first. */
function before(a: { due: number; id: number }, b: { due: number; id: number }): boolean {
  return a.due < b.due || (a.due === b.due && a.id < b.id);
}

/** A timer's delay as the host's timers take it: not a number or negative counts as 0. */
function delayOf(ms: number): number {
  return Number.isFinite(ms) && ms > 0 ? ms : 0;
}
