import { describe, expect, test } from "bun:test";
import { BUSY_GRACE_FACTOR, HeartbeatMonitor, MAX_BUSY_GRACE_MS } from "../../../lib/protocol/heartbeat_monitor.ts";

function rig() {
  let t = 1_000_000;
  const dead: number[] = [];
  const beats: number[] = [];
  const m = new HeartbeatMonitor(
    { intervalMs: 1000, missLimit: 5 },
    (seq) => beats.push(seq),
    (silent) => dead.push(silent),
    () => t,
  );
  const tickEvery = (ms: number, until: number) => {
    while (t < until && dead.length === 0) {
      t += ms;
      m.tick();
    }
  };
  return { m, dead, beats, at: () => t, set: (v: number) => void (t = v), tickEvery };
}

describe("HeartbeatMonitor", () => {
  test("a silent peer is declared dead after missLimit intervals, not before", () => {
    const r = rig();
    const start = r.at();
    r.tickEvery(1000, start + 5000);
    expect(r.dead).toEqual([]);
    r.tickEvery(1000, start + 7000);
    expect(r.dead.length).toBe(1);
    expect(r.at() - start).toBe(6000);
  });

  test("traffic keeps the peer alive", () => {
    const r = rig();
    const start = r.at();
    for (let i = 0; i < 20; i++) {
      r.tickEvery(1000, r.at() + 1000);
      r.m.heard();
    }
    expect(r.dead).toEqual([]);
    expect(r.at() - start).toBe(20_000);
  });

  test("our own stall is not the peer's silence", () => {
    const r = rig();
    // This event loop was blocked for 8 s: the next check runs 8 s late. The peer's frames of that
    // time are still unread in the socket, so it must not be declared dead now.
    r.set(r.at() + 9000);
    r.m.tick();
    expect(r.dead).toEqual([]);
    expect(r.m.ownStallMs).toBe(8000);
    // Then the peer really is silent: only the second before the stall and the time after it count.
    const after = r.at();
    r.tickEvery(1000, after + 10_000);
    expect(r.dead.length).toBe(1);
    expect(r.at() - after).toBe(5000);
  });

  test("a busy announcement extends the allowed silence by its bounded grace", () => {
    const r = rig();
    r.m.heardBusy(2000); // grace 4 x 2 s = 8 s
    const start = r.at();
    r.tickEvery(1000, start + 13_000);
    expect(r.dead).toEqual([]);
    r.tickEvery(1000, start + 20_000);
    expect(r.dead.length).toBe(1);
    expect(r.at() - start).toBe(5000 + BUSY_GRACE_FACTOR * 2000 + 1000);
  });

  test("the grace ends when the peer is heard from, and is capped", () => {
    const r = rig();
    r.m.heardBusy(2000);
    r.m.heard();
    const start = r.at();
    r.tickEvery(1000, start + 7000);
    expect(r.at() - start).toBe(6000);

    const c = rig();
    c.m.heardBusy(1e9);
    const s2 = c.at();
    c.tickEvery(1000, s2 + 10 * MAX_BUSY_GRACE_MS);
    expect(c.at() - s2).toBe(5000 + MAX_BUSY_GRACE_MS + 1000);
  });
});
