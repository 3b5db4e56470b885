/**
 * Follows each request's token sequence (prompt, then its output as it streams back or arrives
 * with the finish) and writes every full block to the BlockBook as it fills, hashed by the same
 * function the workers use (lib/core/block_hash.ts), so the book knows the tokens of every block a
 * worker can publish, prompt or output. A request pins its blocks until it ends.
 * @module
 */
import { type BlockHash, blockHash, rootHash } from "../core/block_hash.ts";
import type { BlockBook } from "./block_book.ts";

interface Chain {
  tokens: number[];
  hashes: BlockHash[];
  salt: string | undefined;
  promptLength: number;
}

/** The block chains of the requests in flight. */
export class RequestChains {
  readonly #book: BlockBook;
  readonly #blockSize: number;
  readonly #chains = new Map<string, Chain>();

  constructor(book: BlockBook, blockSize: number) {
    if (!Number.isInteger(blockSize) || blockSize < 1) {
      throw new RangeError(`blockSize must be an integer >= 1, got ${blockSize}`);
    }
    this.#book = book;
    this.#blockSize = blockSize;
  }

  /** Requests followed now. */
  get size(): number {
    return this.#chains.size;
  }

  /** A request starts; `hashes` are its prompt's block hashes when already computed (the launcher has them). */
  start(requestId: string, promptTokenIds: readonly number[], salt?: string, hashes?: readonly BlockHash[]): void {
    this.end(requestId);
    const c: Chain = { tokens: [...promptTokenIds], hashes: [], salt: salt || undefined, promptLength: 0 };
    c.promptLength = c.tokens.length;
    this.#chains.set(requestId, c);
    this.#extend(c, hashes);
  }

  /** Output tokens that streamed back. */
  append(requestId: string, tokenIds: readonly number[]): void {
    const c = this.#chains.get(requestId);
    if (!c || tokenIds.length === 0) return;
    for (const t of tokenIds) c.tokens.push(t);
    this.#extend(c);
  }

  /** The request's whole output as its finish reports it (a request that did not stream sends it only here). */
  output(requestId: string, outputTokenIds: readonly number[]): void {
    const c = this.#chains.get(requestId);
    if (!c) return;
    const have = c.tokens.length - c.promptLength;
    if (outputTokenIds.length <= have) return;
    for (let i = have; i < outputTokenIds.length; i++) c.tokens.push(outputTokenIds[i]!);
    this.#extend(c);
  }

  /** The request ended: its blocks are unpinned. Idempotent. */
  end(requestId: string): void {
    const c = this.#chains.get(requestId);
    if (!c) return;
    this.#chains.delete(requestId);
    for (const h of c.hashes) this.#book.unpin(h);
  }

  #extend(c: Chain, known?: readonly BlockHash[]): void {
    const bs = this.#blockSize;
    const full = Math.floor(c.tokens.length / bs);
    for (let b = c.hashes.length; b < full; b++) {
      const parent = b === 0 ? rootHash(c.salt) : c.hashes[b - 1]!;
      const tokens = c.tokens.slice(b * bs, (b + 1) * bs);
      const h = known?.[b] ?? blockHash(parent, tokens);
      c.hashes.push(h);
      this.#book.pin(h);
      this.#book.record(h, { parent, tokens, first: b === 0, ...(b === 0 && c.salt ? { salt: c.salt } : {}) });
    }
  }
}
