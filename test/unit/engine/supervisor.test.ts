import { describe, expect, test } from "bun:test";
import { Supervisor } from "../../../lib/engine/supervisor.ts";

function clock() {
  let t = 0;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

describe("Supervisor", () => {
  test("back-off doubles with deaths in a row and stops at the cap", () => {
    const c = clock();
    const s = new Supervisor({ initialDelayMs: 500, maxDelayMs: 4000, maxRestartsPerWindow: 100 }, c.now);
    const delays = [];
    for (let i = 0; i < 6; i++) {
      const d = s.died("w0");
      if (!d.restart) throw new Error(d.why);
      delays.push(d.delayMs);
      c.advance(d.delayMs + 100);
      s.up("w0");
      c.advance(1000);
    }
    expect(delays).toEqual([500, 1000, 2000, 4000, 4000, 4000]);
    expect(s.restarts("w0")).toBe(6);
  });

  test("a minute of health resets the back-off", () => {
    const c = clock();
    const s = new Supervisor({}, c.now);
    expect(s.died("w0")).toMatchObject({ restart: true, delayMs: 500 });
    s.up("w0");
    c.advance(10_000);
    expect(s.died("w0")).toMatchObject({ restart: true, delayMs: 1000 });
    s.up("w0");
    c.advance(60_000);
    expect(s.died("w0")).toMatchObject({ restart: true, delayMs: 500 });
  });

  test("a death during start-up (never up) keeps the streak", () => {
    const c = clock();
    const s = new Supervisor({}, c.now);
    s.died("w0");
    c.advance(120_000);
    expect(s.died("w0")).toMatchObject({ restart: true, delayMs: 1000 });
  });

  test("too many restarts within the window: given up, and allowed again once they age out", () => {
    const c = clock();
    const s = new Supervisor({ maxRestartsPerWindow: 3, windowMs: 60_000 }, c.now);
    for (let i = 0; i < 3; i++) {
      expect(s.died("w1").restart).toBe(true);
      c.advance(1000);
    }
    const d = s.died("w1");
    expect(d.restart).toBe(false);
    if (!d.restart) expect(d.why).toContain("3 restarts");
    expect(s.died("w0").restart).toBe(true); // ledgers are per child
    c.advance(60_000);
    expect(s.died("w1").restart).toBe(true);
  });

  test("a child's own policy values override the shared ones", () => {
    const s = new Supervisor({ initialDelayMs: 500 }).override("control", { initialDelayMs: 50 });
    expect(s.died("control")).toMatchObject({ restart: true, delayMs: 50 });
    expect(s.died("control")).toMatchObject({ restart: true, delayMs: 100 });
    expect(s.died("worker 0")).toMatchObject({ restart: true, delayMs: 500 });
  });

  test("bad policy values are refused by name", () => {
    expect(() => new Supervisor({ maxDelayMs: -1 })).toThrow(/maxDelayMs/);
    expect(() => new Supervisor({ initialDelayMs: 10, maxDelayMs: 5 })).toThrow(/maxDelayMs/);
  });
});
