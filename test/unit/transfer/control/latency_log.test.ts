// The dispatch-to-publish log of completed plans: a bounded window, percentiles over all plans and
// over 1-block plans, the latest plan, argument checks, and the coordinator recording every
// completed plan (never an aborted one) into the control-plane stats.
import { afterEach, expect, test } from "bun:test";
import { summarize, TransferLatencyLog } from "../../../../lib/transfer/control/transfer_latency_log.ts";
import { cachePrompt, candidateOf, makeCluster, type TestCluster, tokens } from "../cluster_fixture.ts";

test("an empty log reports zero samples and no percentile keys", () => {
  expect(new TransferLatencyLog().counters()).toEqual({
    transfer_publish_samples: 0,
    transfer_publish_1block_samples: 0,
  });
  expect(summarize([])).toBeUndefined();
});

test("percentiles over all plans and over 1-block plans, and the latest plan", () => {
  const log = new TransferLatencyLog();
  for (let i = 1; i <= 10; i++) log.record(1, i / 10); // 0.1 .. 1.0 ms
  log.record(8, 5);
  log.record(8, 3);
  const c = log.counters();
  expect(c.transfer_publish_samples).toBe(12);
  expect(c.transfer_publish_1block_samples).toBe(10);
  expect(c.transfer_publish_1block_ms_p50).toBeCloseTo(0.55, 12);
  expect(c.transfer_publish_1block_ms_p95).toBeCloseTo(0.955, 12);
  expect(c.transfer_publish_1block_ms_max).toBe(1);
  expect(c.transfer_publish_ms_max).toBe(5);
  expect(c.transfer_publish_ms_p50).toBeCloseTo(0.65, 12); // 12 values: halfway between the 6th and 7th
  expect(c.transfer_publish_last_ms).toBe(3);
  expect(c.transfer_publish_last_blocks).toBe(8);
  expect(log.summary((b) => b === 8)).toEqual({ samples: 2, p50: 4, p95: 4.9, max: 5 });
  expect(log.total).toBe(12);
});

test("the window keeps the last `capacity` plans, oldest first", () => {
  const log = new TransferLatencyLog(3);
  for (let i = 1; i <= 5; i++) log.record(i, i);
  expect(log.recent()).toEqual([{ blocks: 3, publishMs: 3 }, { blocks: 4, publishMs: 4 }, { blocks: 5, publishMs: 5 }]);
  expect(log.total).toBe(5);
  expect(log.counters()).toMatchObject({
    transfer_publish_samples: 3,
    transfer_publish_ms_max: 5,
    transfer_publish_last_ms: 5,
    transfer_publish_last_blocks: 5,
    transfer_publish_1block_samples: 0,
  });
  expect(log.counters().transfer_publish_1block_ms_p50).toBeUndefined();
});

test("bad arguments are RangeErrors naming the value", () => {
  expect(() => new TransferLatencyLog(0)).toThrow(RangeError);
  const log = new TransferLatencyLog();
  expect(() => log.record(0, 1)).toThrow("got 0");
  expect(() => log.record(1.5, 1)).toThrow(RangeError);
  expect(() => log.record(1, Number.NaN)).toThrow("got NaN");
  expect(() => log.record(1, -1)).toThrow(RangeError);
});

const clusters: TestCluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) await c.close();
});

test("the coordinator records each completed plan's dispatch-to-publish time in its counters", async () => {
  const c = await makeCluster();
  clusters.push(c);
  const short = cachePrompt(c.workers[0]!, tokens(5), 1); // 1 full block
  const long = cachePrompt(c.workers[0]!, tokens(17, 1000), 2); // 4 full blocks
  c.report();
  const one = await c.coordinator.start(candidateOf(c, 0, 1, short), 2000).done;
  expect(one.status).toBe("completed");
  const four = await c.coordinator.start(candidateOf(c, 0, 1, long), 2000).done;
  expect(four.status).toBe("completed");
  const counters = c.coordinator.counters();
  expect(counters).toMatchObject({
    transfer_completed: 2,
    transfer_publish_samples: 2,
    transfer_publish_1block_samples: 1,
    transfer_publish_last_blocks: 4,
  });
  expect(counters.transfer_publish_1block_ms_p50).toBe(one.publishMs!);
  expect(counters.transfer_publish_last_ms).toBe(four.publishMs!);
  expect(counters.transfer_publish_ms_max).toBe(Math.max(one.publishMs!, four.publishMs!));
  expect(c.coordinator.latency.recent().map((s) => s.blocks)).toEqual([1, 4]);
  // The 1-block plan's phase split: prepare and execute within its total, publish the rest.
  const split = c.coordinator.latency.recent()[0]!.phases!;
  expect(split.prepareMs).toBeGreaterThan(0);
  expect(split.executeMs).toBeGreaterThan(0);
  expect(split.prepareMs + split.executeMs).toBeLessThanOrEqual(one.publishMs!);
  expect(counters.transfer_publish_1block_prepare_ms_p50).toBe(split.prepareMs);
  expect(counters.transfer_publish_1block_execute_ms_p50).toBe(split.executeMs);
});

test("the phase trace names each phase's acks with their round trips and the workers' handling times", async () => {
  const lines: string[] = [];
  const c = await makeCluster({ trace: (l) => lines.push(l) });
  clusters.push(c);
  const blocks = cachePrompt(c.workers[0]!, tokens(5), 1);
  c.report();
  const done = await c.coordinator.start(candidateOf(c, 0, 1, blocks), 2000).done;
  expect(done.status).toBe("completed");
  expect(lines).toHaveLength(1);
  // In-process links carry no handling time: "?" stands in for it.
  expect(lines[0]).toMatch(
    /^\[transfer-trace\] t-\d+ background 1 blocks 0->1 over unknown: publish [\d.]+ ms; prepare sent \+[\d.]+: r[01] [\d.]+ \(\?\), r[01] [\d.]+ \(\?\); execute sent \+[\d.]+: r[01] [\d.]+ \(\?\), r[01] [\d.]+ \(\?\); publish sent \+[\d.]+: r1 [\d.]+ \(\?\)$/,
  );
});

test("with timed acks the trace splits each round trip into the worker's handling, the way there and back", async () => {
  const lines: string[] = [];
  const c = await makeCluster({ trace: (l) => lines.push(l), stampAcks: true });
  clusters.push(c);
  const blocks = cachePrompt(c.workers[0]!, tokens(5), 1);
  c.report();
  expect((await c.coordinator.start(candidateOf(c, 0, 1, blocks), 2000).done).status).toBe("completed");
  const acks = [...lines[0]!.matchAll(/r[01] ([\d.]+) \(([\d.]+); there (-?[\d.]+), back (-?[\d.]+)\)/g)];
  expect(acks).toHaveLength(5); // prepare x2, execute x2, publish
  for (const [, rt, handled, there, back] of acks) {
    // The parts add up to the round trip (one clock, sub-ms readings).
    expect(Math.abs(Number(handled) + Number(there) + Number(back) - Number(rt))).toBeLessThan(0.05);
  }
});
