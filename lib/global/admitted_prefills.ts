/**
 * Prefill a rank has admitted but not finished. A worker's load counts a request's prompt as
 * waiting work only until its scheduler admits it; from then on the request counts as running,
 * like a sequence that only decodes, although its prefill may still hold the device for several
 * milliseconds: a rank that was idle reports the admission as its step starts, and a long prompt
 * (or any prompt while a fresh worker's step budget still grows) takes several chunks. A request
 * routed behind that prefill waits for it, so routing must see it. It ends when the rank publishes
 * the prompt's last complete block (its prefill has computed that far), when the request ends, or
 * when the rank dies.
 * @module
 */
import type { BlockHash } from "../core/block_hash.ts";

/** One admitted, unfinished prefill. */
interface AdmittedPrefill {
  rank: number;
  /** Prompt tokens it computes (those not cached when it was routed). */
  tokens: number;
  /** The prompt's last complete block: published once the prefill computed it. */
  lastHash: BlockHash;
}

/** Per-rank totals of admitted, unfinished prefills, kept incrementally. */
export class AdmittedPrefills {
  readonly #byRequest = new Map<string, AdmittedPrefill>();
  // Per rank: the request ids, so a report settles only its own rank's prefills.
  readonly #byRank = new Map<number, Set<string>>();
  // Indexed by rank (ranks are small integers): routing reads them for every candidate of every route.
  readonly #tokens: number[] = [];
  readonly #count: number[] = [];

  /** Admitted prefills not yet finished. */
  get size(): number {
    return this.#byRequest.size;
  }

  /** The rank admitted `requestId`, whose prefill computes `tokens` and ends with block `lastHash`. */
  admit(requestId: string, rank: number, tokens: number, lastHash: BlockHash): void {
    if (!(tokens >= 0)) throw new RangeError(`admitted prefill of ${requestId} needs tokens >= 0, got ${tokens}`);
    this.end(requestId);
    if (tokens === 0) return;
    this.#byRequest.set(requestId, { rank, tokens, lastHash });
    let ids = this.#byRank.get(rank);
    if (!ids) this.#byRank.set(rank, ids = new Set());
    ids.add(requestId);
    this.#tokens[rank] = (this.#tokens[rank] ?? 0) + tokens;
    this.#count[rank] = (this.#count[rank] ?? 0) + 1;
  }

  /** Ends the prefills on `rank` whose last block `published` says the rank now holds. */
  settle(rank: number, published: (hash: BlockHash) => boolean): void {
    const ids = this.#byRank.get(rank);
    if (!ids) return;
    for (const id of ids) if (published(this.#byRequest.get(id)!.lastHash)) this.end(id);
  }

  /** Ends one prefill (finished, the request ended or never ran). Idempotent. */
  end(requestId: string): void {
    const p = this.#byRequest.get(requestId);
    if (!p) return;
    this.#byRequest.delete(requestId);
    this.#byRank.get(p.rank)!.delete(requestId);
    this.#tokens[p.rank]! -= p.tokens;
    this.#count[p.rank]! -= 1;
  }

  /** The rank died: its prefills go. */
  dropRank(rank: number): void {
    for (const id of [...(this.#byRank.get(rank) ?? [])]) this.end(id);
    this.#byRank.delete(rank);
  }

  /** Prompt tokens `rank` admitted and has not finished prefilling. */
  tokens(rank: number): number {
    return this.#tokens[rank] ?? 0;
  }

  /** Requests `rank` admitted whose prefill has not finished. */
  requests(rank: number): number {
    return this.#count[rank] ?? 0;
  }
}
