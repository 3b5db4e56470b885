/**
 * The control plane's part in NCCL pair start-up and health (messages in
 * lib/transfer/paths/nccl/nccl_messages.ts):
 * - rendezvous: holds a worker's nccl_id_offer until its partner's arrives, then answers both with
 *   the lower rank's unique id (or the reason one side cannot join), so both create the pair at
 *   about the same time and neither waits out the NCCL timeout for a partner still loading;
 * - health: remembers each side's last nccl_pair_status (of its direct pair: NCCL or CUDA IPC) and,
 *   when one side has no pair while the other still uses one, tells the other to drop it, so both
 *   sides of a pair use the same path.
 * @module
 */
import type { MessageOf } from "../../../protocol/messages.ts";
import { PairOffers } from "../pair_offers.ts";
import type { NvlinkTopology } from "../../../global/topology.ts";
import { pairKey as key } from "../../control/transfer_cost_model.ts";
// The NCCL pair messages register themselves with the codec when this module loads.
import "./nccl_messages.ts";

/** The answer to one offer (an nccl_id message without type and correlation fields). */
export type NcclIdAnswer = Omit<MessageOf<"nccl_id">, "type" | "id" | "replyTo">;

/** Options of an {@link NcclRendezvous}. */
export interface NcclRendezvousOptions {
  /** Direct NVLink pairs: offers for any other pair are refused. */
  topology?: NvlinkTopology;
  /** Sends nccl_pair_down to `rank` about its pair with `peerRank`. */
  sendPairDown: (rank: number, peerRank: number, reason: string) => void;
}

/** Pairs offers of the two ranks of a pair and tracks both sides' pair health. */
export class NcclRendezvous {
  readonly #o: NcclRendezvousOptions;
  readonly #waiting = new PairOffers<MessageOf<"nccl_id_offer">, NcclIdAnswer>();
  readonly #status = new Map<string, { ok: boolean; error?: string }>();
  readonly #counts = { nccl_offers: 0, nccl_ids_relayed: 0, nccl_offers_refused: 0, nccl_pairs_dropped: 0 };

  constructor(o: NcclRendezvousOptions) {
    this.#o = o;
  }

  /** Takes an offer; `answer` runs once, when the partner's offer arrives (or at once on a refusal). */
  offer(offer: MessageOf<"nccl_id_offer">, owner: unknown, answer: (a: NcclIdAnswer) => void): void {
    this.#counts.nccl_offers++;
    const { rank, peerRank } = offer;
    if (this.#o.topology?.affinity(rank, peerRank) !== 1) {
      this.#counts.nccl_offers_refused++;
      answer({ peerRank, error: `ranks ${rank} and ${peerRank} are not a direct NVLink pair of this engine` });
      return;
    }
    const partner = this.#waiting.match(offer, owner, answer, {
      peerRank,
      error: `superseded by a newer offer of rank ${rank}`,
    });
    if (!partner) return;
    const lo = rank < peerRank ? offer : partner.offer;
    const hi = rank < peerRank ? partner.offer : offer;
    const why = lo.unavailable !== undefined
      ? `rank ${lo.rank} cannot join: ${lo.unavailable}`
      : hi.unavailable !== undefined
      ? `rank ${hi.rank} cannot join: ${hi.unavailable}`
      : lo.uniqueId === undefined
      ? `rank ${lo.rank} (the lower rank) offered no unique id`
      : undefined;
    if (why) {
      this.#counts.nccl_offers_refused++;
      partner.answer({ peerRank: rank, error: why });
      answer({ peerRank, error: why });
      return;
    }
    this.#counts.nccl_ids_relayed++;
    partner.answer({ peerRank: rank, uniqueId: lo.uniqueId });
    answer({ peerRank, uniqueId: lo.uniqueId });
  }

  /** Withdraws the offers `owner` still has waiting (its connection closed). */
  dropOwner(owner: unknown): void {
    this.#waiting.dropOwner(owner);
  }

  /** Records one side's pair health; tells the other side to drop a pair this side does not have. */
  status(m: MessageOf<"nccl_pair_status">): void {
    const { rank, peerRank, ok } = m;
    this.#status.set(key(rank, peerRank), { ok, ...(m.error !== undefined ? { error: m.error } : {}) });
    const other = this.#status.get(key(peerRank, rank));
    if (!other || other.ok === ok) return;
    this.#counts.nccl_pairs_dropped++;
    if (ok) {
      this.#o.sendPairDown(
        rank,
        peerRank,
        `rank ${peerRank} has no direct pair with rank ${rank}: ${other.error ?? "unknown reason"}`,
      );
    } else {this.#o.sendPairDown(
        peerRank,
        rank,
        `rank ${rank} lost its direct pair with rank ${peerRank}: ${m.error ?? "unknown reason"}`,
      );}
  }

  /** Forgets a dead rank's statuses and offers. */
  onRankDown(rank: number): void {
    for (const k of [...this.#status.keys()]) if (k.startsWith(`${rank}->`)) this.#status.delete(k);
    this.#waiting.dropRank(rank);
  }

  /** Counters for the control plane's stats, with nccl_pairs_up: pairs both sides report up. */
  counters(): Record<string, number> {
    let up = 0;
    for (const [k, s] of this.#status) {
      const [a, b] = k.split("->").map(Number) as [number, number];
      if (a < b && s.ok && this.#status.get(key(b, a))?.ok) up++;
    }
    return { ...this.#counts, nccl_pairs_up: up };
  }
}
