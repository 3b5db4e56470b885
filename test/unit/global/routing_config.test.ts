// The routing config: documented defaults and validation naming the bad field.
import { expect, test } from "bun:test";
import { DEFAULT_ROUTING_CONFIG, resolveRoutingConfig } from "../../../lib/global/routing_config.ts";

test("defaults match the documented values", () => {
  const c = resolveRoutingConfig();
  expect(c.policy).toBe("lmpool");
  expect(c.cacheAware).toEqual({ balanceAbsThreshold: 64, balanceRelThreshold: 1.5, matchThreshold: 0.3 });
  expect(c.weightedScorers).toEqual({ prefix: 3, queue: 2, kvUtilization: 2 });
  expect(c).toEqual(DEFAULT_ROUTING_CONFIG);
});

test("sections merge with defaults", () => {
  const c = resolveRoutingConfig({ cost: { runningTokenWeight: 0.5 }, policy: "cache-aware" });
  expect(c.cost.runningTokenWeight).toBe(0.5);
  expect(c.cost.perSequenceTokens).toBe(DEFAULT_ROUTING_CONFIG.cost.perSequenceTokens);
  expect(c.policy).toBe("cache-aware");
});

test("bad values are RangeErrors naming the field and value", () => {
  expect(() => resolveRoutingConfig({ cost: { waitingTokenWeight: -1 } })).toThrow(
    "routing cost.waitingTokenWeight must be a finite number >= 0, got -1",
  );
  expect(() => resolveRoutingConfig({ cacheAware: { matchThreshold: 2 } })).toThrow(/matchThreshold.*got 2/);
  expect(() => resolveRoutingConfig({ cost: { spillLoadRatio: 2 } as never })).toThrow(
    /unknown routing setting cost.spillLoadRatio/,
  );
  // @ts-expect-error: decode coefficients are not routing settings (routes price prefill only)
  expect(() => resolveRoutingConfig({ device: { kvReadMs: -1 } })).toThrow(/device.kvReadMs/);
  expect(() => resolveRoutingConfig({ reservationTtlMs: 0 })).toThrow(/reservationTtlMs/);
});
