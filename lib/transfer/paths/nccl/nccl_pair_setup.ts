/**
 * A worker's start-up of its NCCL pairs, one per direct NVLink partner. Per pair: meet the partner
 * at the control plane's rendezvous (the lower rank offers a fresh unique id, both get it back once
 * both have offered: lib/transfer/paths/nccl/nccl_messages.ts), then join the pair (lp_nccl_pair_create
 * creates the communicators and warms them with one send each way, bounded by the timeout).
 *
 * Joining blocks the event loop, so the rendezvous connection is closed first and this runs before
 * the worker opens its heart-beaten connections. Pairs are set up one at a time in ascending
 * partner order, which is the global (lower, higher) pair order, so every worker blocks only on a
 * pair whose partner is at the same step: no cycle of waits. A pair that fails (NCCL missing,
 * timeout, refused) is logged on one line naming it and the cause, and left to the host path.
 * @module
 */
import type { MessageOf } from "../../../protocol/messages.ts";
import { meetPartner, type PairSetupOptions, safely } from "../control_rendezvous.ts";
import type { PairLink } from "./nccl_data_path.ts";
import { pairName } from "../direct_data_path.ts";
// The NCCL pair messages register themselves with the codec when this module loads.
import "./nccl_messages.ts";

/** Makes NCCL pairs (ffi/kv_transfer.ts KvTransferEngine behind it; a fake in tests). */
export interface NcclPairFactory {
  /** Why NCCL cannot be used in this process, or undefined when it can. */
  unavailable(): string | undefined;
  /** A fresh 128-byte unique id (the lower rank of a pair makes it). */
  uniqueId(): Uint8Array;
  /** Joins the pair as `pairRank` on `device`; blocks until both ranks joined and warmed it, or throws. */
  createPair(uniqueId: Uint8Array, pairRank: 0 | 1, device: number, timeoutMs: number): PairLink;
}

/** Options of {@link setUpNcclPairs}. */
export interface NcclPairSetupOptions extends PairSetupOptions {
  /** This worker's CUDA device. */
  device: number;
  factory: NcclPairFactory;
  /** Bound on creating one pair once both ranks met. */
  timeoutMs: number;
}

/** The pairs that came up, and why the others did not. */
export interface NcclPairSetup {
  pairs: Map<number, PairLink>;
  failed: Map<number, string>;
}

/** Sets up this worker's pairs (see the module doc). Never throws: failures land in `failed`. */
export async function setUpNcclPairs(o: NcclPairSetupOptions): Promise<NcclPairSetup> {
  const log = o.log ?? ((l: string) => console.error(l));
  const out: NcclPairSetup = { pairs: new Map(), failed: new Map() };
  const unavailable = safely(() => o.factory.unavailable());
  const localProblem = unavailable.ok ? unavailable.value : `cannot query NCCL: ${unavailable.error}`;
  for (const peer of [...o.peers].sort((a, b) => a - b)) {
    const pair = pairName(o.rank, peer);
    const pairRank: 0 | 1 = o.rank < peer ? 0 : 1;
    const fail = (cause: string) => {
      out.failed.set(peer, cause);
      log(`[worker ${o.rank}] NCCL pair ${pair} is not available, plans with rank ${peer} use the host path: ${cause}`);
    };
    let problem = localProblem;
    let offered: Uint8Array | undefined;
    if (problem === undefined && pairRank === 0) {
      const id = safely(() => o.factory.uniqueId());
      if (id.ok) offered = id.value;
      else problem = `cannot make a unique id: ${id.error}`;
    }
    let answer: MessageOf<"nccl_id">;
    try {
      const offer = {
        type: "nccl_id_offer" as const,
        rank: o.rank,
        epoch: o.epoch,
        peerRank: peer,
        ...(offered ? { uniqueId: offered } : {}),
        ...(problem !== undefined ? { unavailable: problem } : {}),
      };
      answer = await meetPartner(o, peer, offer, "nccl_id");
    } catch (e) {
      fail(`rendezvous through the control plane failed: ${(e as Error).message}`);
      continue;
    }
    // With a problem here the rendezvous only told the partner not to wait.
    if (problem !== undefined) {
      fail(problem);
      continue;
    }
    if (answer.error !== undefined || answer.uniqueId === undefined) {
      fail(answer.error ?? "the control plane sent no unique id");
      continue;
    }
    const t0 = performance.now();
    const created = safely(() => o.factory.createPair(answer.uniqueId!, pairRank, o.device, o.timeoutMs));
    if (!created.ok) {
      fail(
        `creating the pair (rank ${pairRank} on device ${o.device}, timeout ${o.timeoutMs} ms) failed: ${created.error}`,
      );
      continue;
    }
    out.pairs.set(peer, created.value);
    log(
      `[worker ${o.rank}] NCCL pair ${pair} up (pair rank ${pairRank} on device ${o.device}) in ${
        (performance.now() - t0).toFixed(0)
      } ms`,
    );
  }
  return out;
}
