/**
 * The control plane's routing speed, guarded in CI: lmpool routes at 64 ranks of 12.5k published
 * blocks each (the routing bench's world) must stay within a small factor of the bench's target.
 * A per-route scan of every prompt routed and not yet prefilled once slowed it by an order of
 * magnitude without any test failing; the floor sits at half the target so a slower CI machine
 * passes and such a change does not.
 */
import { expect, test } from "bun:test";
import { buildQueries, buildWorld, measure, targetFor } from "../../../bench/routing.ts";
import { seededRandom } from "../../../lib/core/seeded_random.ts";

const RANKS = 64;

test("lmpool routes at 64 ranks at no less than half the bench's target", () => {
  const rand = seededRandom(42);
  const { trees, snapshots } = buildWorld(RANKS, rand);
  const queries = buildQueries(RANKS, trees, 5000, rand);
  const m = measure("lmpool", snapshots, queries, 500);
  expect(m.hitRate).toBeGreaterThan(0.5);
  expect(m.routesPerS).toBeGreaterThanOrEqual(targetFor(RANKS).routesPerS / 2);
}, 60_000);
