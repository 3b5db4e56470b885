/**
 * What a transfer plan is: the source blocks (hash, parent, physical id, generation) to copy or
 * move from one rank to a direct partner, why, and what the cost model expects of it. Planners
 * produce candidates; the coordinator gives them an id and runs them.
 * @module
 */
import type { BlockHash } from "../../core/block_hash.ts";
import type { EstimateSource } from "./transfer_cost_model.ts";

/** One source block, pinned to its generation (a reused block id makes the plan stale). */
export interface PlannedBlock {
  hash: BlockHash;
  parent: BlockHash;
  srcBlock: number;
  generation: number;
}

/** Why a plan exists. */
export type PlanKind = "prefix-copy" | "offload" | "background";

/** A candidate plan, before it has an id. */
export interface PlanCandidate {
  kind: PlanKind;
  /** copy keeps the source replica; move frees a safe unreferenced source suffix at finalize. */
  mode: "copy" | "move";
  src: number;
  dst: number;
  /** Root-first order: a parent before its children. */
  blocks: PlannedBlock[];
  /** Prefill ms the plan is expected to save, and its estimated dispatch-to-publish ms. */
  savedMs: number;
  estimatedMs: number;
  estimateSource: EstimateSource;
  /**
   * The phase-wait part of estimatedMs (TransferEstimate.waitMs). On completion the cost model
   * learns the dispatch-to-publish time beyond it; absent counts as 0.
   */
  waitMs?: number;
  /** The request a foreground plan serves. */
  requestId?: string;
}

/** A plan being run: a candidate with its id and absolute deadline. */
export interface TransferPlan extends PlanCandidate {
  planId: string;
  /** ms since the epoch (workers share the host clock). */
  deadline: number;
}

/** Why no plan was made (counted in stats as `transfer_skip_<reason>`). */
export type SkipReason =
  | "off"
  | "no_shortage"
  | "no_source"
  | "no_target"
  | "source_invalid"
  | "target_capacity"
  /** The target has cached room, but only by evicting blocks at least as hot as the chains moved. */
  | "target_hotter"
  /** The chains that would fit hang from parents the target does not hold. */
  | "target_parent"
  | "min_batch"
  | "cost"
  | "inbound";

/** A planner's answer. */
export type PlanVerdict = { ok: true; plan: PlanCandidate } | { ok: false; reason: SkipReason; detail: string };

/** A refusal, for planners. */
export function skip(reason: SkipReason, detail: string): PlanVerdict {
  return { ok: false, reason, detail };
}
