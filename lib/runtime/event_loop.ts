/**
 * Yielding to the event loop between synchronous units of work (engine steps), so I/O callbacks
 * and timers run in between (a promise with a time bound: core/clock.ts settlesWithin).
 * @module
 */

/** Resolves after pending I/O callbacks had their turn (setImmediate, else a zero timeout). */
export const yieldToEventLoop: () => Promise<void> = typeof setImmediate === "function"
  ? () => new Promise((r) => setImmediate(r))
  : () => new Promise((r) => setTimeout(r, 0));
