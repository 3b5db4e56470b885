/**
 * Keeping a process's event loop turning, without sleeping in its I/O poller, while a
 * latency-critical exchange is open (a transfer plan's phases). A process that sleeps between
 * messages pays a wake-up on each one, which makes a Unix-socket round trip between two idle
 * processes slower than between two that keep turning, and a plan's phases cross about ten such
 * hops. Spinning costs one core while a
 * condition holds; each condition also ends at its own time bound, so a stuck one cannot spin on.
 * @module
 */
import { yieldToEventLoop } from "./event_loop.ts";

interface Condition {
  active: () => boolean;
  until: number;
}

const conditions = new Set<Condition>();
let turning = false;

const nextTurn = (f: () => void) => void yieldToEventLoop().then(f);

function turn(): void {
  const now = performance.now();
  for (const c of conditions) if (now >= c.until || !c.active()) conditions.delete(c);
  if (conditions.size === 0) {
    turning = false;
    return;
  }
  nextTurn(turn);
}

/** Keeps the event loop turning while `active()` holds, for at most `maxMs`. */
export function keepAwakeWhile(active: () => boolean, maxMs: number): void {
  if (!(maxMs > 0)) throw new RangeError(`maxMs must be > 0, got ${maxMs}`);
  conditions.add({ active, until: performance.now() + maxMs });
  if (turning) return;
  turning = true;
  nextTurn(turn);
}

/** Conditions keeping the loop turning now (for tests). */
export function awakeConditions(): number {
  return conditions.size;
}
