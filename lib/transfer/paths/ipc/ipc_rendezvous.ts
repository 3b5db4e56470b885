/**
 * The control plane's part in CUDA IPC pair start-up (messages in lib/transfer/paths/ipc/ipc_messages.ts):
 * holds a worker's ipc_offer of one stage until its partner's offer of that stage arrives, then
 * answers each side with the other's, so both map each other's KV cache at about the same time and
 * both learn whether the other succeeded. Offers between ranks that are not direct partners
 * (NVLink, or one device) are refused at once. The 64-byte handles pass through; K/V payloads never do.
 * @module
 */
import type { MessageOf } from "../../../protocol/messages.ts";
import { PairOffers } from "../pair_offers.ts";
import type { NvlinkTopology } from "../../../global/topology.ts";
// The CUDA IPC messages register themselves with the codec when this module loads.
import "./ipc_messages.ts";

/** The answer to one offer (an ipc_answer message without type and correlation fields). */
export type IpcAnswer = Omit<MessageOf<"ipc_answer">, "type" | "id" | "replyTo">;

/** Options of an {@link IpcRendezvous}. */
export interface IpcRendezvousOptions {
  /** Direct partners (NVLink or one device): offers for any other pair are refused. */
  topology?: NvlinkTopology;
}

/** Pairs the two ranks' offers of each stage and hands each the other's. */
export class IpcRendezvous {
  readonly #o: IpcRendezvousOptions;
  readonly #waiting = new PairOffers<MessageOf<"ipc_offer">, IpcAnswer>();
  readonly #counts = { ipc_offers: 0, ipc_offers_refused: 0, ipc_handles_relayed: 0, ipc_pairs_opened: 0 };

  constructor(o: IpcRendezvousOptions = {}) {
    this.#o = o;
  }

  /** Takes an offer; `answer` runs once, when the partner's offer of the same stage arrives (or at once on a refusal). */
  offer(offer: MessageOf<"ipc_offer">, owner: unknown, answer: (a: IpcAnswer) => void): void {
    this.#counts.ipc_offers++;
    const { rank, peerRank, stage } = offer;
    if (this.#o.topology?.affinity(rank, peerRank) !== 1) {
      this.#counts.ipc_offers_refused++;
      answer({
        peerRank,
        stage,
        error: `ranks ${rank} and ${peerRank} are not direct partners (NVLink or one device) of this engine`,
      });
      return;
    }
    const partner = this.#waiting.match(offer, owner, answer, {
      peerRank,
      stage,
      error: `superseded by a newer offer of rank ${rank}`,
    }, stage);
    if (!partner) return;
    const both = [offer, partner.offer];
    if (stage === "handle" && both.every((o) => o.handle !== undefined && o.error === undefined)) {
      this.#counts.ipc_handles_relayed++;
    }
    if (stage === "opened" && both.every((o) => o.error === undefined)) this.#counts.ipc_pairs_opened++;
    partner.answer(relayed(offer));
    answer(relayed(partner.offer));
  }

  /** Withdraws the offers `owner` still has waiting (its connection closed). */
  dropOwner(owner: unknown): void {
    this.#waiting.dropOwner(owner);
  }

  /** Forgets a dead rank's waiting offers. */
  onRankDown(rank: number): void {
    this.#waiting.dropRank(rank);
  }

  /** Counters for the control plane's stats (ipc_pairs_opened: pairs both of whose sides mapped the other's cache). */
  counters(): Record<string, number> {
    return { ...this.#counts };
  }
}

/** One side's offer as its partner gets it; the error names the side it came from. */
function relayed(o: MessageOf<"ipc_offer">): IpcAnswer {
  return {
    peerRank: o.rank,
    stage: o.stage,
    ...(o.handle !== undefined ? { handle: o.handle } : {}),
    ...(o.numBlocks !== undefined ? { numBlocks: o.numBlocks } : {}),
    ...(o.blockBytes !== undefined ? { blockBytes: o.blockBytes } : {}),
    ...(o.error !== undefined ? { error: `rank ${o.rank}: ${o.error}` } : {}),
  };
}
