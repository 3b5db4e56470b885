/**
 * Causal attention work of a prefill chunk, counted in (query, key) pairs: a chunk of n tokens
 * starting at position s attends over n*s + n(n+1)/2 pairs (each token to itself and every earlier
 * one). The step budget, the engine cost model and the routing cost all price attention by it.
 * @module
 */

/** Attention pairs of a chunk of `n` tokens starting at position `start`. */
export function chunkPairs(start: number, n: number): number {
  return n * start + (n * (n + 1)) / 2;
}
