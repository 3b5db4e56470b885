/**
 * The control plane's global page table (metadata only, never K/V):
 * prefix hash -> [(rank, physical block, generation, refCount)] with per-rank capacity, load,
 * parent dependencies, recency/frequency, worker epochs, snapshot versions and in-flight markers.
 * A full snapshot replaces a rank's slice atomically; a delta applies only on top of exactly its
 * base version; stale epochs and versions are rejected. Only published blocks ever enter it, so
 * reserved or received-but-unpublished blocks are invisible to routing.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";
import type { BlockDelta, BlockSnapshot } from "../core/block_snapshot.ts";
import { BlockIndex, MAX_INDEXED_RANKS } from "./block_index.ts";
import { RankTable } from "./rank_table.ts";

/** Where one block hash is published. */
export interface Placement {
  rank: number;
  block: number;
  generation: number;
  refCount: number;
}

/** Why a snapshot or delta was not applied. */
export type RejectReason =
  | "retired_epoch"
  | "stale_epoch"
  | "stale_version"
  | "unknown_rank"
  | "base_mismatch"
  | "inconsistent";

/** Outcome of applying a snapshot or delta. */
export type ApplyResult =
  | { applied: true }
  | {
    applied: false;
    reason: RejectReason;
    message: string;
    /** True when the caller should ask the worker for a full snapshot now (once per gap). */
    requestSnapshot: boolean;
  };

/** A prefix match on one rank. */
export interface PrefixMatch {
  /** Leading blocks of the query published on the rank, contiguously from the first. */
  blocks: number;
  /** Of those, blocks with no live reference (they count as reclaimable but will be reused). */
  reclaimable: number;
}

/** An applied change of the table, as {@link GlobalBlockManager.onChange} hears it. */
export type PageTableChange =
  | { kind: "snapshot"; snapshot: BlockSnapshot }
  | { kind: "delta"; delta: BlockDelta }
  | { kind: "drop"; rank: number; epoch: number };

/** The global page table. All mutation happens on the control plane's one event loop. */
export class GlobalBlockManager {
  /** Hears every applied snapshot, delta and dropped rank (the KV-event forwarder listens); unset, nothing is built. */
  onChange: ((change: PageTableChange) => void) | undefined = undefined;
  /** Each healthy rank's slice, indexed by rank (an array: routes read it per candidate). */
  readonly #tables: (RankTable | undefined)[] = [];
  readonly #index = new BlockIndex();
  /** Highest epoch of each dropped rank: messages of that epoch or older are from a dead worker. */
  readonly #retired = new Map<number, number>();
  /** Ranks whose slice is out of date until a full snapshot arrives. */
  readonly #awaitingSnapshot = new Set<number>();
  readonly #inFlightByPlan = new Map<string, { rank: number; hashes: BlockHash[] }[]>();
  readonly #inFlight = new Map<number, Map<BlockHash, number>>();
  #healthy: number[] = [];

  /** Ranks with a live slice, ascending. */
  healthyRanks(): readonly number[] {
    return this.#healthy;
  }

  /** One more than the highest healthy rank (0 when none is): the length per-rank arrays need. */
  rankSpan(): number {
    return this.#healthy.length === 0 ? 0 : this.#healthy[this.#healthy.length - 1]! + 1;
  }

  /** True when `rank` has a live slice. */
  isHealthy(rank: number): boolean {
    return this.#tables[rank] !== undefined;
  }

  /** The slice of `rank` (read-only by convention), or undefined. */
  table(rank: number): RankTable | undefined {
    return this.#tables[rank];
  }

  /** Published blocks over all ranks. */
  totalEntries(): number {
    let n = 0;
    for (const r of this.#healthy) n += this.#tables[r]!.size;
    return n;
  }

  /** Replaces `snapshot.rank`'s slice, unless the snapshot is stale. */
  applySnapshot(snapshot: BlockSnapshot): ApplyResult {
    const { rank, epoch, version } = snapshot;
    if (!Number.isInteger(rank) || rank < 0 || rank >= MAX_INDEXED_RANKS) {
      throw new RangeError(`snapshot rank must be an integer in 0..${MAX_INDEXED_RANKS - 1}, got ${rank}`);
    }
    const retired = this.#retired.get(rank);
    if (retired !== undefined && epoch <= retired) {
      return reject(
        "retired_epoch",
        `snapshot of rank ${rank} epoch ${epoch}: that worker died (epochs <= ${retired} retired)`,
        false,
      );
    }
    const cur = this.#tables[rank];
    if (cur && epoch < cur.epoch) {
      return reject("stale_epoch", `snapshot of rank ${rank} has epoch ${epoch} < current ${cur.epoch}`, false);
    }
    if (cur && epoch === cur.epoch && version <= cur.version) {
      return reject(
        "stale_version",
        `snapshot of rank ${rank} epoch ${epoch} has version ${version} <= applied ${cur.version}`,
        false,
      );
    }
    const seen = new Set<BlockHash>();
    for (const e of snapshot.entries) {
      if (seen.has(e.hash)) {
        return reject(
          "inconsistent",
          `snapshot of rank ${rank} version ${version} lists block ${e.hash} twice`,
          this.#askOnce(rank),
        );
      }
      seen.add(e.hash);
    }
    if (cur && epoch !== cur.epoch) this.#clearInFlight(rank); // a restarted worker lost every block
    if (cur) { for (const h of cur.entries.keys()) this.#index.remove(rank, h); }
    this.#setTable(rank, new RankTable(snapshot));
    for (const e of snapshot.entries) this.#index.add(rank, e.hash, e.refCount === 0, e.parent);
    this.#awaitingSnapshot.delete(rank);
    this.onChange?.({ kind: "snapshot", snapshot });
    return { applied: true };
  }

  /** Applies `delta` on top of exactly `delta.baseVersion`; otherwise rejects and asks for a snapshot. */
  applyDelta(delta: BlockDelta): ApplyResult {
    const { rank, epoch, baseVersion, version } = delta;
    const retired = this.#retired.get(rank);
    if (retired !== undefined && epoch <= retired) {
      return reject(
        "retired_epoch",
        `delta of rank ${rank} epoch ${epoch}: that worker died (epochs <= ${retired} retired)`,
        false,
      );
    }
    const cur = this.#tables[rank];
    if (!cur) return reject("unknown_rank", `delta of rank ${rank} before any snapshot of it`, this.#askOnce(rank));
    if (epoch < cur.epoch) {
      return reject("stale_epoch", `delta of rank ${rank} has epoch ${epoch} < current ${cur.epoch}`, false);
    }
    if (epoch > cur.epoch) {
      return reject(
        "base_mismatch",
        `delta of rank ${rank} is from epoch ${epoch}, the table holds epoch ${cur.epoch}`,
        this.#askOnce(rank),
      );
    }
    if (version <= cur.version) {
      return reject(
        "stale_version",
        `delta of rank ${rank} to version ${version} is not newer than applied ${cur.version}`,
        false,
      );
    }
    if (version <= baseVersion) {
      return reject(
        "inconsistent",
        `delta of rank ${rank} has version ${version} <= its base ${baseVersion}`,
        this.#askOnce(rank),
      );
    }
    if (baseVersion !== cur.version) {
      return reject(
        "base_mismatch",
        `delta of rank ${rank} is based on version ${baseVersion}, the table holds ${cur.version}`,
        this.#askOnce(rank),
      );
    }
    const problem = cur.deltaProblem(delta);
    if (problem) {
      return reject(
        "inconsistent",
        `delta ${baseVersion}->${version} of rank ${rank}: ${problem}`,
        this.#askOnce(rank),
      );
    }
    cur.applyDelta(delta);
    for (const r of delta.removed) this.#index.remove(rank, r.hash);
    for (const a of delta.added) this.#index.add(rank, a.hash, a.refCount === 0, a.parent);
    for (const t of delta.touched) this.#index.setIdle(rank, t.hash, t.refCount === 0);
    this.onChange?.({ kind: "delta", delta });
    return { applied: true };
  }

  /**
   * A worker died (or its connection dropped): its blocks leave the table. With `retire` (default:
   * the worker is known dead) its epoch and older ones are refused from then on; without, the same
   * worker may reconnect and send a full snapshot again.
   */
  dropRank(rank: number, epoch?: number, options: { retire?: boolean } = {}): boolean {
    const cur = this.#tables[rank];
    const e = epoch ?? cur?.epoch;
    if (e !== undefined && options.retire !== false) {
      this.#retired.set(rank, Math.max(e, this.#retired.get(rank) ?? -1));
    }
    this.#awaitingSnapshot.delete(rank);
    this.#clearInFlight(rank);
    if (!cur) return false;
    if (epoch !== undefined && cur.epoch > epoch) return false; // a newer incarnation already reported
    for (const h of cur.entries.keys()) this.#index.remove(rank, h);
    this.#setTable(rank, undefined);
    this.onChange?.({ kind: "drop", rank, epoch: cur.epoch });
    return true;
  }

  /** Every rank's slice as a full snapshot (for dumps and consistency checks). */
  toSnapshots(): BlockSnapshot[] {
    return this.#healthy.map((rank) => {
      const t = this.#tables[rank]!;
      return {
        rank,
        epoch: t.epoch,
        version: t.version,
        capacity: { ...t.capacity },
        load: { ...t.load },
        entries: [...t.entries.values()].map((e) => ({ ...e })),
      };
    });
  }

  /** Every rank holding `hash`, with the physical block and generation there. */
  placements(hash: BlockHash): Placement[] {
    return this.#index.holderRanks(hash).map((rank) => {
      const e = this.#tables[rank]!.entries.get(hash)!;
      return { rank, block: e.block, generation: e.generation, refCount: e.refCount };
    });
  }

  /**
   * Prefix matches of `hashes` on every rank below `blocks.length` in one walk (one lookup per
   * block): `blocks[r]` and `reclaimable[r]` as in {@link matchPrefix}, zero for a rank without a
   * slice. {@link rankSpan} slots cover every healthy rank.
   */
  matchAll(hashes: readonly BlockHash[], blocks: Int32Array, reclaimable: Int32Array): void {
    this.#index.matchAll(hashes, blocks, reclaimable);
  }

  /** Longest contiguous chain of `hashes` (from the first) published on `rank`: O(match length). */
  matchPrefix(rank: number, hashes: readonly BlockHash[]): PrefixMatch {
    const t = this.#tables[rank];
    if (!t) return { blocks: 0, reclaimable: 0 };
    let blocks = 0;
    let reclaimable = 0;
    for (const h of hashes) {
      const e = t.entries.get(h);
      if (!e) break;
      blocks++;
      if (e.refCount === 0) reclaimable++;
    }
    return { blocks, reclaimable };
  }

  /** Marks blocks as locked by transfer plan `planId` (no reuse/reclaim decisions may count them). */
  lockInFlight(planId: string, rank: number, hashes: readonly BlockHash[]): void {
    const marks = this.#inFlight.get(rank) ?? new Map<BlockHash, number>();
    this.#inFlight.set(rank, marks);
    for (const h of hashes) marks.set(h, (marks.get(h) ?? 0) + 1);
    const list = this.#inFlightByPlan.get(planId) ?? [];
    list.push({ rank, hashes: [...hashes] });
    this.#inFlightByPlan.set(planId, list);
  }

  /** Releases every marker of `planId` (idempotent). */
  unlockInFlight(planId: string): void {
    for (const { rank, hashes } of this.#inFlightByPlan.get(planId) ?? []) {
      const marks = this.#inFlight.get(rank);
      if (!marks) continue;
      for (const h of hashes) {
        const n = (marks.get(h) ?? 1) - 1;
        if (n <= 0) marks.delete(h);
        else marks.set(h, n);
      }
    }
    this.#inFlightByPlan.delete(planId);
  }

  /** True when a plan holds `hash` on `rank`. */
  isInFlight(rank: number, hash: BlockHash): boolean {
    return this.#inFlight.get(rank)?.has(hash) ?? false;
  }

  /** Published blocks of `rank` that plans lock and that have no live reference (not reclaimable now). */
  inFlightReclaimable(rank: number): number {
    const marks = this.#inFlight.get(rank);
    const t = this.#tables[rank];
    if (!marks || !t) return 0;
    let n = 0;
    for (const h of marks.keys()) if (t.entries.get(h)?.refCount === 0) n++;
    return n;
  }

  #askOnce(rank: number): boolean {
    if (this.#awaitingSnapshot.has(rank)) return false;
    this.#awaitingSnapshot.add(rank);
    return true;
  }

  #clearInFlight(rank: number): void {
    this.#inFlight.delete(rank);
    for (const [plan, list] of this.#inFlightByPlan) {
      const kept = list.filter((x) => x.rank !== rank);
      if (kept.length === 0) this.#inFlightByPlan.delete(plan);
      else this.#inFlightByPlan.set(plan, kept);
    }
  }

  #setTable(rank: number, table: RankTable | undefined): void {
    this.#tables[rank] = table;
    const healthy: number[] = [];
    for (let r = 0; r < this.#tables.length; r++) if (this.#tables[r] !== undefined) healthy.push(r);
    this.#healthy = healthy;
  }
}

function reject(reason: RejectReason, message: string, requestSnapshot: boolean): ApplyResult {
  return { applied: false, reason, message, requestSnapshot };
}
