/**
 * The waiting room both start-up rendezvous share (NCCL unique ids in nccl_rendezvous.ts, CUDA IPC
 * handles in ipc_rendezvous.ts): a worker's offer for its pair with peerRank waits, keyed by
 * direction and stage, until the partner's offer of the same stage arrives. A repeated offer (the
 * worker reconnected) supersedes the one before; offers go when their connection or rank does.
 * @module
 */
import { pairKey } from "../control/transfer_cost_model.ts";

/** What every offer names: the offering rank and its partner. */
export interface PairOffer {
  rank: number;
  peerRank: number;
}

/** An offer waiting for its partner's, with how to answer it. */
export interface WaitingOffer<O extends PairOffer, A> {
  offer: O;
  /** Who holds the offer (its connection): the offer is withdrawn when it goes away. */
  owner: unknown;
  answer: (a: A) => void;
}

/** Offers of one kind waiting for their partners'. */
export class PairOffers<O extends PairOffer, A> {
  readonly #waiting = new Map<string, WaitingOffer<O, A>>();

  /**
   * The partner's waiting offer of `stage` (taken out of the room), or undefined after parking
   * `offer` in its place; a parked offer of the same side and stage gets `superseded` as its answer.
   */
  match(offer: O, owner: unknown, answer: (a: A) => void, superseded: A, stage = ""): WaitingOffer<O, A> | undefined {
    const partnerKey = key(offer.peerRank, offer.rank, stage);
    const partner = this.#waiting.get(partnerKey);
    if (partner) {
      this.#waiting.delete(partnerKey);
      return partner;
    }
    const own = key(offer.rank, offer.peerRank, stage);
    this.#waiting.get(own)?.answer(superseded);
    this.#waiting.set(own, { offer, owner, answer });
    return undefined;
  }

  /** Withdraws the offers `owner` still has waiting (its connection closed). */
  dropOwner(owner: unknown): void {
    for (const [k, w] of this.#waiting) if (w.owner === owner) this.#waiting.delete(k);
  }

  /** Forgets a dead rank's waiting offers. */
  dropRank(rank: number): void {
    for (const [k, w] of this.#waiting) if (w.offer.rank === rank) this.#waiting.delete(k);
  }
}

function key(rank: number, peerRank: number, stage: string): string {
  return stage === "" ? pairKey(rank, peerRank) : `${pairKey(rank, peerRank)}:${stage}`;
}
