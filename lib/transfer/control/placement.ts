/**
 * Background placement: which hot prefix chains to copy ahead of demand, and where.
 * Hotness combines complete-chain accesses (a routed query whose prefix is resident somewhere),
 * route hits, and demand visible at ingress (routed requests not yet finished), decaying with a
 * half-life. A hot chain becomes a candidate as the deepest resident leaf with all its resident
 * ancestors; it is placed on a direct partner of its owner only if every gate passes: destination
 * absence, source/target load skew, cooldown, pair idleness, target capacity and the cost ratio.
 * Target capacity: free blocks beyond the target's reserve (targetReserveShare) for the whole
 * resident chain the target lacks, not only for the blocks copied: a copy of a chain's head makes
 * the target a second home of the chain, whose requests then prefill the rest there, and a
 * speculative copy must never evict the target's own cache, neither by itself nor through the
 * prefill it draws (chains of one plan count together, shared blocks once). In the cost ratio the
 * benefit counts at most one avoidable cold prefill (the destination self-warms after its first
 * miss) and the cost leaves out the phase waits of busy ranks (no request waits for the copy). Each chain
 * contributes at most backgroundCopyMaxBlocks blocks; candidates of one directed pair are
 * deduplicated and coalesced into one plan of at most backgroundCopyBatchMaxBlocks.
 * @module
 */
import type { BlockHash } from "../../core/block_hash.ts";
import type { GlobalBlockManager } from "../../global/global_block_manager.ts";
import type { NvlinkTopology } from "../../global/topology.ts";
import type { TransferConfig } from "./transfer_config.ts";
import type { TransferCostModel } from "./transfer_cost_model.ts";
import type { PlanCandidate, PlannedBlock } from "./transfer_plan.ts";

interface Tracked {
  chain: BlockHash[];
  score: number;
  at: number;
  /** Order of first tracking: ties in score go to the chain tracked first. */
  seq: number;
}

/** A chain whose hotness passed the threshold. */
export interface HotChain {
  /** Root-first hashes, ending at the hot leaf. */
  chain: readonly BlockHash[];
  score: number;
}

/** Decaying hotness of prefix chains, keyed by their deepest resident block. */
export class HotnessTracker {
  readonly #config: TransferConfig;
  readonly #chains = new Map<BlockHash, Tracked>();
  /** Routed, unfinished requests and the chain each wants (demand visible at ingress). */
  readonly #demandOf = new Map<string, BlockHash>();
  readonly #demand = new Map<BlockHash, number>();
  /**
   * Leaves whose score reached the threshold at their last access. Decay only lowers a score, so
   * any other chain can be hot only through open demand: a pass looks at these and at the leaves
   * with demand, never at every tracked chain.
   */
  readonly #strong = new Set<BlockHash>();
  #tracked = 0;

  constructor(config: TransferConfig) {
    this.#config = config;
  }

  /** Chains tracked. */
  get size(): number {
    return this.#chains.size;
  }

  /**
   * A routed query: `resident` leading blocks of `hashes` are published on some rank, `hit` when
   * the chosen rank holds some of them. Counts the access, the hit, and the request's demand.
   */
  observe(requestId: string, hashes: readonly BlockHash[], resident: number, hit: boolean, now: number): void {
    if (resident <= 0) return;
    const leaf = hashes[resident - 1]!;
    let t = this.#chains.get(leaf);
    if (!t) {
      t = { chain: hashes.slice(0, resident), score: 0, at: now, seq: this.#tracked++ };
      this.#chains.set(leaf, t);
      if (this.#chains.size > this.#config.maxTrackedChains) this.#forgetColdest(now);
    }
    t.score = this.#decayed(t, now) + this.#config.accessWeight + (hit ? this.#config.routeHitWeight : 0);
    t.at = now;
    if (t.score >= this.#config.hotnessThreshold) this.#strong.add(leaf);
    this.release(requestId);
    this.#demandOf.set(requestId, leaf);
    this.#demand.set(leaf, (this.#demand.get(leaf) ?? 0) + 1);
  }

  /** The request finished (or was never dispatched): its demand ends. Idempotent. */
  release(requestId: string): void {
    const leaf = this.#demandOf.get(requestId);
    if (leaf === undefined) return;
    this.#demandOf.delete(requestId);
    const n = (this.#demand.get(leaf) ?? 1) - 1;
    if (n <= 0) this.#demand.delete(leaf);
    else this.#demand.set(leaf, n);
  }

  /** Current score of the chain ending at `leaf` (decayed, plus open demand). */
  score(leaf: BlockHash, now: number): number {
    const t = this.#chains.get(leaf);
    return (t ? this.#decayed(t, now) : 0) + this.#config.demandWeight * (this.#demand.get(leaf) ?? 0);
  }

  /** Chains at or above the hotness threshold, hottest first. */
  hot(now: number): HotChain[] {
    const threshold = this.#config.hotnessThreshold;
    const found: { t: Tracked; score: number }[] = [];
    for (const leaf of this.#strong) {
      const t = this.#chains.get(leaf);
      const decayed = t ? this.#decayed(t, now) : 0;
      if (!t || decayed < threshold) {
        this.#strong.delete(leaf);
        continue;
      }
      found.push({ t, score: decayed + this.#config.demandWeight * (this.#demand.get(leaf) ?? 0) });
    }
    for (const leaf of this.#demand.keys()) {
      const t = this.#chains.get(leaf);
      if (!t || this.#strong.has(leaf)) continue;
      const score = this.score(leaf, now);
      if (score >= threshold) found.push({ t, score });
    }
    found.sort((a, b) => b.score - a.score || a.t.seq - b.t.seq);
    return found.map(({ t, score }) => ({ chain: t.chain, score }));
  }

  #decayed(t: Tracked, now: number): number {
    return t.score * 2 ** (-(now - t.at) / this.#config.hotnessHalfLifeMs);
  }

  /** Forgets the coldest tenth. */
  #forgetColdest(now: number): void {
    const ranked = [...this.#chains].map(([leaf, t]) => [leaf, this.#decayed(t, now)] as const).sort((a, b) =>
      a[1] - b[1]
    );
    for (const [leaf] of ranked.slice(0, Math.max(1, Math.floor(ranked.length / 10)))) {
      this.#chains.delete(leaf);
      this.#strong.delete(leaf);
    }
  }
}

/** What the background planner reads. */
export interface PlacementEnv {
  blocks: GlobalBlockManager;
  topology: NvlinkTopology;
  config: TransferConfig;
  cost: TransferCostModel;
  blockBytes: (rank: number) => number;
  blockSize: (rank: number) => number;
  /** Token-equivalent queue work of a rank (as routing projects it). */
  queueWork: (rank: number) => number;
  /** Free blocks net of route reservations and of blocks running plans bring there. */
  netFree: (rank: number) => number;
  inbound: (rank: number, hash: BlockHash) => boolean;
  movingOut: (rank: number, hash: BlockHash) => boolean;
  /** A plan runs between a and b (either direction). */
  pairBusy: (a: number, b: number) => boolean;
  /** The chain ending at `leaf` was placed on `rank` within the cooldown. */
  coolingDown: (leaf: BlockHash, rank: number) => boolean;
}

/** A background plan and the leases it grants once published. */
export interface PlacementCandidate {
  plan: PlanCandidate;
  /** Deepest copied hash of each chain and its depth (blocks from the root). */
  leases: { hash: BlockHash; depth: number }[];
}

/** Candidate placements of `hot` chains, at most one plan per directed pair. */
export function planPlacements(env: PlacementEnv, hot: readonly HotChain[]): PlacementCandidate[] {
  const { blocks, config } = env;
  const reserveOf = (rank: number) =>
    Math.ceil(config.targetReserveShare * (blocks.table(rank)?.capacity.numBlocks ?? 0));
  const batches = new Map<
    string,
    {
      src: number;
      dst: number;
      blocks: PlannedBlock[];
      hashes: Set<BlockHash>;
      /** Blocks the destination holds once it serves every chain of the batch: each one's whole resident part. */
      served: Set<BlockHash>;
      savedMs: number;
      leases: PlacementCandidate["leases"];
    }
  >();
  for (const { chain } of hot) {
    let depth = 0;
    const owners: number[] = [];
    for (const r of blocks.healthyRanks()) {
      const m = blocks.matchPrefix(r, chain).blocks;
      if (m > depth) (depth = m), (owners.length = 0);
      if (m === depth && m > 0) owners.push(r);
    }
    if (depth === 0) continue;
    const resident = chain.slice(0, depth);
    placed: for (const src of owners) {
      for (const dst of env.topology.partners(src)) {
        if (!blocks.isHealthy(dst)) continue;
        const have = blocks.matchPrefix(dst, resident).blocks;
        if (have >= depth) continue; // destination absence
        const end = Math.min(depth, have + config.backgroundCopyMaxBlocks);
        if (env.coolingDown(resident[end - 1]!, dst) || env.pairBusy(src, dst)) continue;
        const qs = env.queueWork(src);
        const qd = env.queueWork(dst);
        if (qs - qd < config.minLoadSkewTokens || qs < config.minLoadSkewRatio * qd) continue;
        const key = `${src}->${dst}`;
        const batch = batches.get(key) ??
          { src, dst, blocks: [], hashes: new Set<BlockHash>(), served: new Set<BlockHash>(), savedMs: 0, leases: [] };
        // The copy makes dst a second home of the chain (its lease and the route cost both draw the
        // chain's requests there), and those requests prefill the rest of the resident chain there:
        // with room for the copied head only, that prefill evicts dst's own cache, whose re-prefill
        // costs more than the one cold prefill of the head the copy saves.
        const served = resident.slice(have).filter((h) => !batch.served.has(h));
        if (env.netFree(dst) - reserveOf(dst) < batch.served.size + served.length) continue;
        const table = blocks.table(src)!;
        const add: PlannedBlock[] = [];
        let valid = true;
        for (const h of resident.slice(have, end)) {
          if (batch.hashes.has(h)) continue;
          const e = table.entries.get(h);
          if (!e || env.inbound(dst, h) || env.movingOut(src, h)) {
            valid = false;
            break;
          }
          add.push({ hash: e.hash, parent: e.parent, srcBlock: e.block, generation: e.generation });
        }
        if (!valid || batch.blocks.length + add.length > config.backgroundCopyBatchMaxBlocks) continue;
        for (const b of add) batch.hashes.add(b.hash), batch.blocks.push(b);
        for (const h of served) batch.served.add(h);
        // At most one avoidable cold prefill of the copied blocks.
        batch.savedMs += env.cost.savedPrefillMs(dst, (end - have) * env.blockSize(dst));
        batch.leases.push({ hash: resident[end - 1]!, depth: end });
        batches.set(key, batch);
        break placed;
      }
    }
  }
  const out: PlacementCandidate[] = [];
  for (const b of batches.values()) {
    if (b.blocks.length === 0 || b.blocks.length < config.minBatchBlocks) continue;
    const est = env.cost.estimate(b.src, b.dst, b.blocks.length, env.blockBytes(b.src));
    // No request waits for a background copy: busy ranks' phase waits only delay its publish (the
    // deadline covers that) and use no GPU or link time, so the gate prices the transfer alone.
    if (!env.cost.admits(b.savedMs, est.ms - est.waitMs)) continue;
    out.push({
      plan: {
        kind: "background",
        mode: "copy",
        src: b.src,
        dst: b.dst,
        blocks: b.blocks,
        savedMs: b.savedMs,
        estimatedMs: est.ms,
        estimateSource: est.source,
        waitMs: est.waitMs,
      },
      leases: b.leases,
    });
  }
  return out;
}
