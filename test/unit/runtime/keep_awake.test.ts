import { describe, expect, test } from "bun:test";
import { awakeConditions, keepAwakeWhile } from "../../../lib/runtime/keep_awake.ts";

const turn = () => new Promise<void>((r) => setImmediate(r));
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe("keepAwakeWhile", () => {
  test("keeps turning while the condition holds, and stops once it does not", async () => {
    let open = true;
    let checks = 0;
    keepAwakeWhile(() => (checks++, open), 10_000);
    expect(awakeConditions()).toBe(1);
    for (let i = 0; i < 5; i++) await turn();
    expect(checks).toBeGreaterThanOrEqual(3); // checked on every turn, not once
    open = false;
    for (let i = 0; i < 3; i++) await turn();
    expect(awakeConditions()).toBe(0);
  });

  test("a condition that stays true ends at its time bound", async () => {
    keepAwakeWhile(() => true, 20);
    expect(awakeConditions()).toBe(1);
    await sleep(40);
    await turn();
    expect(awakeConditions()).toBe(0);
  });

  test("several conditions: the loop turns until the last one ends", async () => {
    let a = true;
    let b = true;
    keepAwakeWhile(() => a, 10_000);
    keepAwakeWhile(() => b, 10_000);
    a = false;
    await turn();
    await turn();
    expect(awakeConditions()).toBe(1);
    b = false;
    await turn();
    await turn();
    expect(awakeConditions()).toBe(0);
  });

  test("rejects a bound that is not positive, naming it", () => {
    expect(() => keepAwakeWhile(() => true, 0)).toThrow("maxMs must be > 0, got 0");
    expect(() => keepAwakeWhile(() => true, Number.NaN)).toThrow("got NaN");
  });
});
