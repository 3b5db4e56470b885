// The injectable clock: the real one reads performance.now / Date.now and uses the host's timers;
// the virtual one fires timers in due order (ties in the order set) only when advanced, so the
// control plane runs deterministically on simulated time.
import { expect, test } from "bun:test";
import { realClock, settleOrReject, settlesWithin } from "../../../lib/core/clock.ts";
import { VirtualClock } from "../../../lib/core/virtual_clock.ts";

test("the real clock: monotonic now on the performance timeline, wall time from Date.now, host timers", async () => {
  const before = Date.now();
  const wall = realClock.wallNow();
  expect(wall).toBeGreaterThanOrEqual(before);
  expect(Math.abs(realClock.timeOrigin + realClock.now() - Date.now())).toBeLessThan(1000);
  const fired = await new Promise<number>((resolve) => {
    const t0 = realClock.now();
    realClock.setTimeout(() => resolve(realClock.now() - t0), 5, { keepsAlive: false });
  });
  expect(fired).toBeGreaterThanOrEqual(4);
  let ticks = 0;
  const h = realClock.setInterval(() => ticks++, 1);
  await new Promise((r) => setTimeout(r, 20));
  realClock.clearInterval(h);
  const after = ticks;
  await new Promise((r) => setTimeout(r, 10));
  expect(after).toBeGreaterThan(0);
  expect(ticks).toBe(after);
  realClock.clearTimeout(undefined);
});

test("virtual timers fire in due order, ties in the order they were set, only when the clock moves", () => {
  const clock = new VirtualClock({ startMs: 100, timeOrigin: 1_000 });
  const order: string[] = [];
  clock.setTimeout(() => order.push(`b@${clock.now()}`), 20);
  clock.setTimeout(() => order.push(`a@${clock.now()}`), 10);
  clock.setTimeout(() => order.push(`c@${clock.now()}`), 20);
  const dropped = clock.setTimeout(() => order.push("dropped"), 15);
  clock.setTimeout(() => order.push(`now@${clock.now()}`), -5); // a negative delay is 0, as on the host
  clock.clearTimeout(dropped);
  expect(order).toEqual([]);
  expect(clock.nextDue()).toBe(100);
  clock.advanceSync(19);
  expect(order).toEqual(["now@100", "a@110"]);
  expect(clock.wallNow()).toBe(1_119);
  clock.advanceSync(1);
  expect(order).toEqual(["now@100", "a@110", "b@120", "c@120"]);
  expect(clock.pendingTimers).toBe(0);
  expect(clock.fireNext()).toBe(false);
});

test("a virtual interval repeats at its period until cleared; a timer set by a timer fires in the same advance", () => {
  const clock = new VirtualClock();
  const seen: number[] = [];
  const h = clock.setInterval(() => {
    seen.push(clock.now());
    if (seen.length === 2) clock.setTimeout(() => seen.push(-clock.now()), 5);
  }, 10);
  clock.advanceSync(35);
  expect(seen).toEqual([10, 20, -25, 30]);
  clock.clearInterval(h);
  clock.advanceSync(100);
  expect(seen).toEqual([10, 20, -25, 30]);
  expect(clock.now()).toBe(135);
});

test("clearing a fired or already cleared timer changes nothing; an interval may clear itself", () => {
  const clock = new VirtualClock();
  const seen: string[] = [];
  const once = clock.setTimeout(() => seen.push("once"), 5);
  const other = clock.setTimeout(() => seen.push("other"), 50);
  const self: { h?: ReturnType<VirtualClock["setInterval"]> } = {};
  self.h = clock.setInterval(() => {
    seen.push(`tick@${clock.now()}`);
    if (clock.now() >= 20) clock.clearInterval(self.h);
  }, 10);
  expect(clock.pendingTimers).toBe(3);
  clock.advanceSync(6);
  clock.clearTimeout(once);
  clock.clearTimeout(once);
  expect(clock.pendingTimers).toBe(2);
  clock.advanceSync(30);
  expect(seen).toEqual(["once", "tick@10", "tick@20"]);
  expect(clock.pendingTimers).toBe(1);
  clock.clearTimeout(other);
  clock.clearTimeout(other);
  expect([clock.pendingTimers, clock.nextDue()]).toEqual([0, undefined]);
  expect(clock.fireNext()).toBe(false);
});

test("advance lets each timer's promise jobs run before the next timer fires", async () => {
  const clock = new VirtualClock();
  const seen: string[] = [];
  const sleep = (ms: number) => new Promise<void>((r) => clock.setTimeout(r, ms));
  void (async () => {
    await sleep(10);
    seen.push(`woke@${clock.now()}`);
    await sleep(10); // set at 10 by the code the first timer woke: due at 20
    seen.push(`woke again@${clock.now()}`);
  })();
  clock.setTimeout(() => seen.push(`timer@${clock.now()}`), 15);
  await clock.advance(30);
  expect(seen).toEqual(["woke@10", "timer@15", "woke again@20"]);
});

test("bad arguments are refused naming the value", async () => {
  expect(() => new VirtualClock({ startMs: NaN })).toThrow(/startMs must be finite, got NaN/);
  expect(() => new VirtualClock({ timeOrigin: Infinity })).toThrow(/timeOrigin must be finite, got Infinity/);
  const clock = new VirtualClock();
  expect(() => clock.advanceSync(-1)).toThrow(/ms >= 0, got -1/);
  await expect(clock.advance(NaN)).rejects.toThrow(/ms >= 0, got NaN/);
});

test("settlesWithin and settleOrReject bound a promise by the given clock's time", async () => {
  const clock = new VirtualClock();
  const never = new Promise<number>(() => {});
  let within: boolean | undefined;
  void settlesWithin(never, 50, clock).then((v) => (within = v));
  let late: Error | undefined;
  void settleOrReject(never, 80, () => new Error("late"), clock).catch((e: Error) => (late = e));
  await clock.advance(49);
  expect(within).toBeUndefined();
  await clock.advance(1);
  expect(within).toBe(false);
  expect(late).toBeUndefined();
  await clock.advance(30);
  expect(late?.message).toBe("late");
  expect(await settlesWithin(Promise.reject(new Error("x")), 50, clock)).toBe(true);
  expect(await settleOrReject(Promise.resolve(7), 50, () => new Error("late"), clock)).toBe(7);
  expect(clock.pendingTimers).toBe(0); // settled ones cleared their timers
  expect(await settlesWithin(new Promise((r) => setTimeout(r, 1)), 1000)).toBe(true); // the real clock by default
});
