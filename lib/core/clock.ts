/**
 * The one way the control plane reads time and sets timers. Production passes {@link realClock};
 * the cluster simulator and unit tests pass a virtual clock (virtual_clock.ts), so the same routing
 * and transfer code runs on simulated time, deterministically, without waiting in real time.
 *
 * Two readings, because two kinds of time cross the code:
 * - `now()` is monotonic: durations, timeouts, ages and rates inside one process.
 * - `wallNow()` is milliseconds since the Unix epoch: deadlines sent to other processes, which check
 *   them against their own wall clocks (a transfer plan's deadline).
 * @module
 */

declare const timerBrand: unique symbol;
/** A timer a {@link Clock} started; only that clock's clearTimeout/clearInterval takes it. */
export type TimerHandle = { readonly [timerBrand]: true };

/** Options of a timer. */
export interface TimerOptions {
  /**
   * false: the timer alone does not keep the process running (Node's `unref`), for housekeeping
   * that must not delay an exit. Default true.
   */
  keepsAlive?: boolean;
}

/** Time and timers, injected wherever the control plane needs them. */
export interface Clock {
  /** Monotonic milliseconds (an arbitrary origin); for durations and local timers. */
  now(): number;
  /**
   * Milliseconds since the Unix epoch at which `now()` read 0: `timeOrigin + now()` places a
   * monotonic reading on the epoch timeline to sub-millisecond precision (for comparing with
   * another process's timestamps in traces).
   */
  readonly timeOrigin: number;
  /** Milliseconds since the Unix epoch, as other processes read it; for deadlines they check. */
  wallNow(): number;
  /** Runs `fn` once after `ms` (of this clock's time). */
  setTimeout(fn: () => void, ms: number, options?: TimerOptions): TimerHandle;
  /** Cancels a timer of setTimeout; undefined or a fired timer is a no-op. */
  clearTimeout(handle: TimerHandle | undefined): void;
  /** Runs `fn` every `ms` (of this clock's time). */
  setInterval(fn: () => void, ms: number, options?: TimerOptions): TimerHandle;
  /** Cancels a timer of setInterval; undefined is a no-op. */
  clearInterval(handle: TimerHandle | undefined): void;
}

type HostTimer = ReturnType<typeof globalThis.setTimeout>;

function hostTimer(timer: HostTimer, options: TimerOptions | undefined): TimerHandle {
  if (options?.keepsAlive === false) (timer as { unref?: () => void }).unref?.();
  return timer as unknown as TimerHandle;
}

/**
 * The process's own clock: `performance.now()` for `now()` and `Date.now()` for `wallNow()` (the
 * reading every worker checks deadlines against), and the host's timers.
 */
export const realClock: Clock = Object.freeze({
  now: () => performance.now(),
  get timeOrigin() {
    return performance.timeOrigin;
  },
  wallNow: () => Date.now(),
  setTimeout: (fn: () => void, ms: number, options?: TimerOptions) => hostTimer(globalThis.setTimeout(fn, ms), options),
  clearTimeout: (handle: TimerHandle | undefined) =>
    globalThis.clearTimeout(handle as unknown as HostTimer | undefined),
  setInterval: (fn: () => void, ms: number, options?: TimerOptions) =>
    hostTimer(globalThis.setInterval(fn, ms) as unknown as HostTimer, options),
  clearInterval: (handle: TimerHandle | undefined) =>
    globalThis.clearInterval(handle as unknown as HostTimer | undefined),
});

/** Resolves true once `p` settles (either way), or false after `ms` on `clock` if it has not; the timer is cleared. */
export async function settlesWithin(p: Promise<unknown>, ms: number, clock: Clock = realClock): Promise<boolean> {
  let timer: TimerHandle | undefined;
  const late = new Promise<false>((r) => (timer = clock.setTimeout(() => r(false), ms)));
  const settled = p.then(() => true as const, () => true as const);
  try {
    return await Promise.race([settled, late]);
  } finally {
    clock.clearTimeout(timer);
  }
}

/**
 * Settles as `p` does, or rejects with `late()` after `ms` on `clock` if `p` has not settled by
 * then; the timer is cleared either way.
 */
export async function settleOrReject<T>(
  p: Promise<T>,
  ms: number,
  late: () => Error,
  clock: Clock = realClock,
): Promise<T> {
  let timer: TimerHandle | undefined;
  const expired = new Promise<never>((_, reject) => (timer = clock.setTimeout(() => reject(late()), ms)));
  try {
    return await Promise.race([p, expired]);
  } finally {
    clock.clearTimeout(timer);
  }
}
