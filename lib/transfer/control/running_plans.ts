/**
 * What the coordinator knows about the plans running now: which blocks are arriving where (so plans
 * do not duplicate each other), which are leaving (so nothing plans on blocks a move releases),
 * which rank pairs are busy, and whether a plan's source pinned its blocks yet. Each
 * {@link RunningPlan} registers itself in these indexes (and locks its source blocks in the global
 * block manager's in-flight accounting) when it starts, and removes itself from all of them, once,
 * when it ends.
 * @module
 */
import type { BlockHash } from "../../core/block_hash.ts";
import type { GlobalBlockManager } from "../../global/global_block_manager.ts";
import type { PlanOutcome } from "./plan_phases.ts";
import type { TransferPlan } from "./transfer_plan.ts";

/** A running plan that brings blocks to a rank. */
export interface InboundPlan {
  plan: TransferPlan;
  done: Promise<PlanOutcome>;
  /** When it started (the coordinator's monotonic clock, ms). */
  startedAt: number;
}

/** The indexes the running plans keep themselves in. */
interface PlanIndexes {
  blocks: GlobalBlockManager;
  inbound: Map<number, Map<BlockHash, InboundPlan>>;
  movingOut: Set<string>;
  pairs: Map<string, number>;
  byId: Map<string, RunningPlan>;
}

/** The running plans of one coordinator, and the questions planners ask about them. */
export class RunningPlans {
  readonly #indexes: PlanIndexes;
  #count = 0;

  constructor(blocks: GlobalBlockManager) {
    this.#indexes = { blocks, inbound: new Map(), movingOut: new Set(), pairs: new Map(), byId: new Map() };
  }

  /** Plans running now. */
  get size(): number {
    return this.#count;
  }

  /** Registers `plan` (whose outcome `done` settles when it ends) as running since `startedAt`. */
  enter(plan: TransferPlan, done: Promise<PlanOutcome>, startedAt: number): RunningPlan {
    this.#count++;
    return new RunningPlan(this.#indexes, { plan, done, startedAt }, () => this.#count--);
  }

  /** A running plan brings `hash` to `rank`. */
  isInbound(rank: number, hash: BlockHash): boolean {
    return this.#indexes.inbound.get(rank)?.has(hash) ?? false;
  }

  /** Blocks running plans bring to `rank`: room there that its free count does not show taken yet. */
  inboundBlocks(rank: number): number {
    return this.#indexes.inbound.get(rank)?.size ?? 0;
  }

  /** Running plans bringing any of `hashes` to `rank`, each with how many of those hashes it brings. */
  inboundPlans(rank: number, hashes: readonly BlockHash[]): (InboundPlan & { blocks: number })[] {
    const m = this.#indexes.inbound.get(rank);
    if (!m) return [];
    const out = new Map<InboundPlan, number>();
    for (const h of hashes) {
      const p = m.get(h);
      if (p) out.set(p, (out.get(p) ?? 0) + 1);
    }
    return [...out].map(([p, blocks]) => ({ ...p, blocks }));
  }

  /** A running move takes `hash` away from `rank`. */
  isMovingOut(rank: number, hash: BlockHash): boolean {
    const moving = this.#indexes.movingOut;
    return moving.size > 0 && moving.has(movingKey(rank, hash));
  }

  /** A plan runs between `a` and `b`, in either direction. */
  pairBusy(a: number, b: number): boolean {
    return (this.#indexes.pairs.get(pairName(a, b)) ?? 0) > 0;
  }

  /**
   * Resolves true once both sides accepted `planId`'s prepare (the source's blocks are pinned), false
   * when the plan ended before that or is not running.
   */
  prepared(planId: string): Promise<boolean> {
    return this.#indexes.byId.get(planId)?.prepared ?? Promise.resolve(false);
  }
}

/** One running plan's entries in the indexes; {@link leave} takes them all back. */
export class RunningPlan {
  readonly record: InboundPlan;
  /** Settles true at {@link markPrepared}, false if the plan leaves first. */
  readonly prepared: Promise<boolean>;
  readonly #indexes: PlanIndexes;
  readonly #resolvePrepared: (ok: boolean) => void;
  readonly #onLeave: () => void;
  #left = false;

  constructor(indexes: PlanIndexes, record: InboundPlan, onLeave: () => void) {
    this.#indexes = indexes;
    this.record = record;
    this.#onLeave = onLeave;
    const { promise, resolve } = Promise.withResolvers<boolean>();
    this.prepared = promise;
    this.#resolvePrepared = resolve;
    const { plan } = record;
    indexes.byId.set(plan.planId, this);
    const inbound = indexes.inbound.get(plan.dst) ?? new Map<BlockHash, InboundPlan>();
    indexes.inbound.set(plan.dst, inbound);
    for (const b of plan.blocks) inbound.set(b.hash, record);
    if (plan.mode === "move") { for (const b of plan.blocks) indexes.movingOut.add(movingKey(plan.src, b.hash)); }
    const pair = pairName(plan.src, plan.dst);
    indexes.pairs.set(pair, (indexes.pairs.get(pair) ?? 0) + 1);
    indexes.blocks.lockInFlight(plan.planId, plan.src, plan.blocks.map((b) => b.hash));
  }

  /** Both sides accepted prepare: the source's blocks are pinned. */
  markPrepared(): void {
    this.#resolvePrepared(true);
  }

  /** Removes the plan from every index (idempotent). */
  leave(): void {
    if (this.#left) return;
    this.#left = true;
    const { plan } = this.record;
    const x = this.#indexes;
    this.#resolvePrepared(false); // no-op once prepared
    if (x.byId.get(plan.planId) === this) x.byId.delete(plan.planId);
    x.blocks.unlockInFlight(plan.planId);
    const inbound = x.inbound.get(plan.dst);
    if (inbound) { for (const b of plan.blocks) if (inbound.get(b.hash) === this.record) inbound.delete(b.hash); }
    if (plan.mode === "move") { for (const b of plan.blocks) x.movingOut.delete(movingKey(plan.src, b.hash)); }
    const pair = pairName(plan.src, plan.dst);
    const n = (x.pairs.get(pair) ?? 1) - 1;
    if (n <= 0) x.pairs.delete(pair);
    else x.pairs.set(pair, n);
    this.#onLeave();
  }
}

function movingKey(rank: number, hash: BlockHash): string {
  return `${rank}:${hash}`;
}

function pairName(a: number, b: number): string {
  return a < b ? `${a}-${b}` : `${b}-${a}`;
}
