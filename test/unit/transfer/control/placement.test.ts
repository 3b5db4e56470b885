// Background placement: hotness (accesses, route hits, ingress demand, decay), each gate of a
// candidate (destination absence, load skew, cooldown, pair idleness, target capacity for the whole
// resident chain, cost), the per-chain cap of 8 and the per-pair batch cap of 128 with deduplication,
// and leases honoured by routing.
import { describe, expect, test } from "bun:test";
import type { BlockHash } from "../../../../lib/core/block_hash.ts";
import { VirtualClock } from "../../../../lib/core/virtual_clock.ts";
import { GlobalScheduler } from "../../../../lib/global/global_scheduler.ts";
import {
  type HotChain,
  HotnessTracker,
  type PlacementEnv,
  planPlacements,
} from "../../../../lib/transfer/control/placement.ts";
import { PlacementLeases } from "../../../../lib/transfer/control/placement_leases.ts";
import { NvlinkTopology } from "../../../../lib/global/topology.ts";
import { resolveTransferConfig, type TransferConfig } from "../../../../lib/transfer/control/transfer_config.ts";
import { TransferCostModel } from "../../../../lib/transfer/control/transfer_cost_model.ts";
import { chainEntries, hashesOf, IDLE, promptTokens, snapshot } from "../../global/page_table_fixture.ts";

describe("hotness", () => {
  test("accesses and hits add up, decay with the half-life, and open demand counts until released", () => {
    const h = new HotnessTracker(resolveTransferConfig({ hotnessThreshold: 3, hotnessHalfLifeMs: 1000 }));
    const chain = hashesOf(promptTokens(1, 160));
    h.observe("a", chain, 0, false, 0); // nothing resident: no candidate
    expect(h.size).toBe(0);
    h.observe("a", chain, 6, true, 0); // access 1 + hit 1, demand 0.5
    expect(h.score(chain[5]!, 0)).toBe(2.5);
    expect(h.hot(0)).toEqual([]);
    h.observe("b", chain, 6, false, 0);
    expect(h.score(chain[5]!, 0)).toBe(4);
    expect(h.hot(0).map((c) => c.chain.length)).toEqual([6]);
    expect(h.score(chain[5]!, 1000)).toBe(1.5 + 1); // halved, plus two open requests
    h.release("a");
    h.release("b");
    h.release("b");
    expect(h.score(chain[5]!, 2000)).toBe(0.75);
  });

  test("hot() lists every tracked chain at the threshold, hottest first, ties in tracking order", () => {
    const config = resolveTransferConfig({ hotnessThreshold: 3, hotnessHalfLifeMs: 500 });
    const h = new HotnessTracker(config);
    const chains = Array.from({ length: 16 }, (_, k) => hashesOf(promptTokens(k, 16 * (2 + (k % 5)))));
    let seed = 5;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const open: string[] = [];
    const tracked = new Map<string, BlockHash[]>(); // leaf -> chain, in the order first tracked
    for (let step = 0; step < 600; step++) {
      const now = step * 20;
      if (rand() < 0.7) {
        const c = chains[Math.floor(rand() * chains.length)]!;
        const resident = 1 + Math.floor(rand() * c.length);
        const id = `r${step}`;
        h.observe(id, c, resident, rand() < 0.5, now);
        if (!tracked.has(c[resident - 1]!)) tracked.set(c[resident - 1]!, c.slice(0, resident));
        open.push(id);
      } else if (open.length > 0) h.release(open.splice(Math.floor(rand() * open.length), 1)[0]!);
      const want = [...tracked].map(([leaf, chain]) => ({ chain, score: h.score(leaf, now) }))
        .filter((x) => x.score >= config.hotnessThreshold)
        .sort((a, b) => b.score - a.score);
      expect(h.hot(now)).toEqual(want);
    }
  });
});

const HOT = hashesOf(promptTokens(1, 20 * 16)); // 20 blocks

/** world()'s environment over another scheduler's blocks, queues and free blocks. */
function envOver(s: GlobalScheduler): PlacementEnv {
  return {
    ...world().env,
    blocks: s.blocks,
    queueWork: (r) => s.blocks.table(r)!.load.waitingTokens,
    netFree: (r) => s.blocks.table(r)!.capacity.numFree,
  };
}

function world(
  o: {
    dstEntries?: number;
    srcLoad?: number;
    dstLoad?: number;
    dstFree?: number;
    config?: Partial<TransferConfig>;
    blockBytes?: number;
  } = {},
) {
  const s = new GlobalScheduler({ topology: new NvlinkTopology(2, [[0, 1]]) });
  const load = (tokens: number) => ({ ...IDLE, numWaiting: tokens > 0 ? 1 : 0, waitingTokens: tokens });
  s.applySnapshot(snapshot(0, { entries: chainEntries(HOT, 0), load: load(o.srcLoad ?? 4000) }));
  s.applySnapshot(
    snapshot(1, {
      entries: chainEntries(HOT.slice(0, o.dstEntries ?? 0), 500),
      load: load(o.dstLoad ?? 0),
      free: o.dstFree,
    }),
  );
  const config = resolveTransferConfig({ mode: "auto", targetReserveShare: 0, ...o.config });
  const busy = new Set<string>();
  const cooling = new Set<string>();
  const env: PlacementEnv = {
    blocks: s.blocks,
    topology: s.topology!,
    config,
    cost: new TransferCostModel(config),
    blockBytes: () => o.blockBytes ?? 1000,
    blockSize: () => 16,
    queueWork: (r) => s.blocks.table(r)!.load.waitingTokens,
    netFree: (r) => s.blocks.table(r)!.capacity.numFree,
    inbound: () => false,
    movingOut: () => false,
    pairBusy: (a, b) => busy.has(`${Math.min(a, b)}-${Math.max(a, b)}`),
    coolingDown: (h, r) => cooling.has(`${h}@${r}`),
  };
  return { s, env, busy, cooling };
}
const hot = (...chains: BlockHash[][]): HotChain[] => chains.map((chain) => ({ chain, score: 10 }));

describe("background candidates", () => {
  test("the deepest resident chain, capped at 8 blocks, goes to the idle partner with a lease", () => {
    const { env } = world();
    const [c] = planPlacements(env, hot(HOT));
    expect(c!.plan).toMatchObject({ kind: "background", mode: "copy", src: 0, dst: 1 });
    expect(c!.plan.blocks.map((b) => b.hash)).toEqual(HOT.slice(0, 8));
    expect(c!.leases).toEqual([{ hash: HOT[7]!, depth: 8 }]);
    expect(c!.plan.savedMs).toBeCloseTo(8 * 16 * 0.02, 10); // one cold prefill of the copied blocks
    // A chain hotter than what is resident anywhere is cut to the resident part.
    const longer = hashesOf(promptTokens(1, 30 * 16));
    const { env: e2 } = world({ dstEntries: 16 });
    expect(planPlacements(e2, hot(longer))[0]!.plan.blocks.map((b) => b.hash)).toEqual(HOT.slice(16, 20));
  });

  test("each gate refuses: destination holds it, no load skew, cooldown, busy pair, no room, cost", () => {
    expect(planPlacements(world({ dstEntries: 20 }).env, hot(HOT))).toEqual([]);
    expect(planPlacements(world({ srcLoad: 200 }).env, hot(HOT))).toEqual([]); // gap < 256 tokens
    expect(planPlacements(world({ srcLoad: 1400, dstLoad: 1000 }).env, hot(HOT))).toEqual([]); // ratio < 1.5
    const w = world();
    w.cooling.add(`${HOT[7]}@1`);
    expect(planPlacements(w.env, hot(HOT))).toEqual([]);
    w.cooling.clear();
    w.busy.add("0-1");
    expect(planPlacements(w.env, hot(HOT))).toEqual([]);
    // The target keeps room for its own next prompts (0.8% of its 1000 blocks is 8) beyond the whole
    // 20-block chain the copy of its head draws there: 20 + 8 > 27.
    const reserve = { config: { targetReserveShare: 0.008 } };
    expect(planPlacements(world({ dstFree: 27, ...reserve }).env, hot(HOT))).toEqual([]);
    expect(planPlacements(world({ dstFree: 28, ...reserve }).env, hot(HOT))).toHaveLength(1);
    expect(planPlacements(world({ dstFree: 20 }).env, hot(HOT))).toHaveLength(1); // no reserve
    expect(planPlacements(world({ blockBytes: 1e8 }).env, hot(HOT))).toEqual([]); // 2.16 ms at 370 GB/s > 2.56 ms / 2
    expect(planPlacements(world({ blockBytes: 1e8, config: { mode: "force" } }).env, hot(HOT))).toHaveLength(1);
  });

  test("the target needs free room for the whole resident chain it lacks, not only the copied head", () => {
    // 8 of the 20 blocks are copied, but the chain's requests then prefill the other 12 there too.
    expect(planPlacements(world({ dstFree: 19 }).env, hot(HOT))).toEqual([]);
    const [c] = planPlacements(world({ dstFree: 20 }).env, hot(HOT));
    expect(c!.plan.blocks).toHaveLength(8);
    // Blocks the target already holds need no room: it lacks 14 of the 20.
    expect(planPlacements(world({ dstEntries: 6, dstFree: 13 }).env, hot(HOT))).toEqual([]);
    expect(planPlacements(world({ dstEntries: 6, dstFree: 14 }).env, hot(HOT))[0]!.plan.blocks).toHaveLength(8);
    // Chains of one plan count together, blocks they share once: a 24-block chain sharing HOT's
    // first 16 blocks adds 8, so the two need 28; with 27 free only the first one goes.
    const branch = hashesOf(promptTokens(1, 16 * 16, 77, 8 * 16));
    expect(branch.slice(0, 16)).toEqual(HOT.slice(0, 16));
    const leasesWith = (free: number) => {
      const s = new GlobalScheduler({ topology: new NvlinkTopology(2, [[0, 1]]) });
      s.applySnapshot(
        snapshot(0, {
          entries: [...chainEntries(HOT, 0), ...chainEntries(branch, 100).slice(16)],
          load: { ...IDLE, numWaiting: 1, waitingTokens: 4000 },
        }),
      );
      s.applySnapshot(snapshot(1, { free }));
      const e = envOver(s);
      return planPlacements(e, hot(HOT, branch)).flatMap((c) => c.leases.map((l) => l.depth));
    };
    expect(leasesWith(27)).toEqual([8]);
    expect(leasesWith(28)).toEqual([8, 8]);
  });

  test("busy ranks' phase waits are on the plan's estimate but not in its gate (no request waits for it)", () => {
    const w = world();
    w.env.cost.observeStepWait(0, 100); // the loaded source steps 200 ms prefills
    const [c] = planPlacements(w.env, hot(HOT));
    expect(c!.plan.waitMs).toBe(200); // prepare and execute wait for the source
    expect(c!.plan.estimatedMs).toBeGreaterThan(200); // what a request joining the copy would wait
    expect(planPlacements(world({ blockBytes: 1e8 }).env, hot(HOT))).toEqual([]); // the transfer itself still counts
  });

  test("candidates of one pair are deduplicated and coalesced up to 128 blocks", () => {
    const chains = Array.from({ length: 20 }, (_, k) => hashesOf(promptTokens(100 + k, 8 * 16)));
    const s = new GlobalScheduler({ topology: new NvlinkTopology(2, [[0, 1]]) });
    s.applySnapshot(
      snapshot(0, {
        entries: chains.flatMap((c, k) => chainEntries(c, 8 * k)),
        load: { ...IDLE, waitingTokens: 5000 },
      }),
    );
    s.applySnapshot(snapshot(1, {}));
    const e = envOver(s);
    const sharedTail = hashesOf(promptTokens(100, 6 * 16, 55, 32)); // the first 6 blocks of chains[0], then its own 2
    expect(sharedTail.slice(0, 6)).toEqual(chains[0]!.slice(0, 6));
    s.applySnapshot(
      snapshot(0, {
        version: 2,
        entries: [...chains.flatMap((c, k) => chainEntries(c, 8 * k)), ...chainEntries(sharedTail, 900).slice(6)],
        load: { ...IDLE, waitingTokens: 5000 },
      }),
    );
    const out = planPlacements(e, hot(chains[0]!, sharedTail, ...chains.slice(1)));
    expect(out).toHaveLength(1);
    const blocks = out[0]!.plan.blocks.map((b) => b.hash);
    expect(blocks.length).toBeLessThanOrEqual(128);
    expect(new Set(blocks).size).toBe(blocks.length);
    expect(blocks.slice(0, 10)).toEqual([...chains[0]!, ...sharedTail.slice(6)]);
    expect(out[0]!.leases.slice(0, 2)).toEqual([{ hash: chains[0]![7]!, depth: 8 }, {
      hash: sharedTail[7]!,
      depth: 8,
    }]);
    expect(blocks.length).toBe(10 + 14 * 8); // 16 chains fit: the rest wait for the next pass
  });
});

describe("placement leases", () => {
  function routed(policy: "lmpool" | "round-robin", leaseFor: number | undefined, now = 0, ownerQueue = 50) {
    const s = new GlobalScheduler({ topology: new NvlinkTopology(2, [[0, 1]]), config: { policy } });
    // Both hold the prefix; rank 1 carries a little more load, so lmpool alone prefers rank 0.
    const owner = ownerQueue > 0 ? { load: { ...IDLE, numWaiting: 1, waitingTokens: ownerQueue } } : {};
    s.applySnapshot(snapshot(0, { entries: chainEntries(HOT, 0), ...owner }));
    s.applySnapshot(
      snapshot(1, {
        entries: chainEntries(HOT.slice(0, 8), 500),
        load: { ...IDLE, numWaiting: 1, waitingTokens: 100 },
      }),
    );
    const leases = new PlacementLeases({ bonusTokens: 512, clock: new VirtualClock({ startMs: now }) });
    s.routeAdvisor = leases;
    if (leaseFor !== undefined) leases.grant(HOT[7]!, 8, leaseFor, 1000);
    const tokens = [...promptTokens(1, 20 * 16), 5, 6, 7];
    return {
      d: s.route({
        requestId: `q${Math.random()}`,
        blockHashes: hashesOf(tokens),
        promptTokens: tokens.length,
        maxTokens: 4,
      }),
      leases,
    };
  }

  test("routing prefers the lease's rank for its prefix while the lease lasts, for lmpool only", () => {
    expect(routed("lmpool", undefined).d.rank).toBe(0);
    const { d, leases } = routed("lmpool", 1);
    expect(d).toMatchObject({ rank: 1, reason: "lease" });
    expect(leases.routed).toBe(1);
    expect(routed("lmpool", 0).leases.hits).toBe(1);
    expect(routed("round-robin", 1).d.reason).toBe("round-robin");
    // An idle pick has no load to spread: the lease's costlier rank is not worth its bonus.
    expect(routed("lmpool", 1, 0, 0).d).toMatchObject({ rank: 0 });
    const expired = new PlacementLeases({ bonusTokens: 512, clock: new VirtualClock({ startMs: 5000 }) });
    expect(expired.size).toBe(0);
  });
});

describe("leases on a partial copy", () => {
  const LONG = hashesOf(promptTokens(7, 80 * 16)); // 80 blocks; a placement copies the first 8
  function route(o: { ownerQueue: number; leaseQueue: number; skew?: boolean }) {
    const s = new GlobalScheduler({ topology: new NvlinkTopology(2, [[0, 1]]) });
    const load = (tokens: number) => ({ ...IDLE, numWaiting: tokens > 0 ? 1 : 0, waitingTokens: tokens });
    s.applySnapshot(snapshot(0, { entries: chainEntries(LONG, 0), load: load(o.ownerQueue) }));
    s.applySnapshot(snapshot(1, { entries: chainEntries(LONG.slice(0, 8), 500), load: load(o.leaseQueue) }));
    const leases = new PlacementLeases({
      bonusTokens: 0,
      ...(o.skew === false ? {} : { minLoadSkewTokens: 256, minLoadSkewRatio: 1.5 }),
      clock: new VirtualClock(),
    });
    s.routeAdvisor = leases;
    leases.grant(LONG[7]!, 8, 1, 1000);
    const tokens = [...promptTokens(7, 80 * 16), 5, 6, 7];
    return s.route({
      requestId: `q${Math.random()}`,
      blockHashes: hashesOf(tokens),
      promptTokens: tokens.length,
      maxTokens: 4,
    });
  }

  test("while the owner is as much busier as placement required, its lease sends the request to the partial copy", () => {
    // Owner: 300 queued tokens + 3 to prefill; copy: 72 blocks (1152 tokens) still to prefill there.
    expect(route({ ownerQueue: 300, leaseQueue: 0, skew: false }).rank).toBe(0); // cost alone keeps the owner
    expect(route({ ownerQueue: 300, leaseQueue: 0 })).toMatchObject({ rank: 1, reason: "lease" });
    expect(route({ ownerQueue: 300, leaseQueue: 200 }).rank).toBe(0); // queue gap 100 < 256 tokens: no skew left
  });
});
