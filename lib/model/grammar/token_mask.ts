/**
 * A grammar's next-token bitmask as the native sampler takes a constraint: the list of allowed
 * tokens or the list of banned ones, whichever is shorter (RowControls' allowedTokenIds and
 * bannedTokenIds), so a step copies at most half the vocabulary per constrained row.
 * @module
 */

/** One row's constraint: exactly one list is set; `allowed` empty means no token is allowed. */
export interface TokenMask {
  allowed?: Int32Array;
  banned?: Int32Array;
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

/** The shorter list of `bits` (bit t set: token t allowed) over tokens [0, vocabSize). */
export function tokenMaskOf(bits: Int32Array, vocabSize: number): TokenMask {
  const words = Math.ceil(vocabSize / 32);
  const tail = vocabSize % 32 === 0 ? -1 : (1 << (vocabSize % 32)) - 1;
  let allowedCount = 0;
  for (let w = 0; w < words; w++) allowedCount += popcount(w === words - 1 ? bits[w]! & tail : bits[w]!);
  const wantAllowed = allowedCount <= vocabSize - allowedCount;
  const out = new Int32Array(wantAllowed ? allowedCount : vocabSize - allowedCount);
  let n = 0;
  for (let w = 0; w < words; w++) {
    let word = w === words - 1 ? bits[w]! & tail : bits[w]!;
    if (!wantAllowed) word = ~word & (w === words - 1 ? tail : -1);
    while (word !== 0) {
      const low = word & -word;
      out[n++] = w * 32 + (31 - Math.clz32(low));
      word ^= low;
    }
  }
  return wantAllowed ? { allowed: out } : { banned: out };
}
