/**
 * Yielding to the event loop between synchronous units of work (engine steps), so I/O callbacks
 * and timers run in between; and waiting for a promise with a time bound.
 * @module
 */

/** Resolves after pending I/O callbacks had their turn (setImmediate, else a zero timeout). */
export const yieldToEventLoop: () => Promise<void> =
  typeof setImmediate === "function" ? () => new Promise((r) => setImmediate(r)) : () => new Promise((r) => setTimeout(r, 0));

/** Resolves true once `p` settles (either way), or false after `ms` if it has not; the timer is cleared. */
export async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((r) => (timer = setTimeout(() => r(false), ms)));
  const settled = p.then(() => true as const, () => true as const);
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}
