/**
 * A small seeded PRNG (xoshiro128**, state filled by SplitMix32 from the seed) so that every
 * workload and arrival schedule is a pure function of its seed, identical on Bun and Deno.
 * @module
 */

function splitMix32(state: { s: number }): number {
  state.s = (state.s + 0x9e3779b9) | 0;
  let z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** Deterministic random numbers from a 32-bit seed. */
export class SeededRandom {
  #s0: number;
  #s1: number;
  #s2: number;
  #s3: number;

  constructor(readonly seed: number) {
    if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be a safe integer, got ${String(seed)}`);
    // Mix the high bits in too, so seeds that differ only above bit 31 still differ.
    const st = { s: (seed ^ Math.floor(seed / 2 ** 32)) | 0 };
    this.#s0 = splitMix32(st);
    this.#s1 = splitMix32(st);
    this.#s2 = splitMix32(st);
    this.#s3 = splitMix32(st);
  }

  /** Next 32-bit unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.#s1, 5), 7), 9) >>> 0;
    const t = this.#s1 << 9;
    this.#s2 ^= this.#s0;
    this.#s3 ^= this.#s1;
    this.#s1 ^= this.#s2;
    this.#s0 ^= this.#s3;
    this.#s2 ^= t;
    this.#s3 = rotl(this.#s3, 11);
    return result;
  }

  /** Uniform float in [0, 1) with 53 random bits. */
  next(): number {
    const hi = this.nextUint32() >>> 5; // 27 bits
    const lo = this.nextUint32() >>> 6; // 26 bits
    return (hi * 67108864 + lo) / 9007199254740992;
  }

  /** Uniform integer in [lo, hi], both inclusive. */
  int(lo: number, hi: number): number {
    if (!Number.isSafeInteger(lo) || !Number.isSafeInteger(hi) || hi < lo) {
      throw new RangeError(`int range must be integers lo <= hi, got [${lo}, ${hi}]`);
    }
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** Exponential variate with the given rate (mean 1/rate): Poisson-process inter-arrival gaps. */
  exponential(rate: number): number {
    if (!(rate > 0) || !Number.isFinite(rate)) {
      throw new RangeError(`exponential rate must be a finite number > 0, got ${rate}`);
    }
    return -Math.log(1 - this.next()) / rate;
  }

  /** `n` token ids drawn uniformly from [lo, hi]. */
  tokens(n: number, lo: number, hi: number): number[] {
    const out = new Array<number>(n);
    for (let i = 0; i < n; i++) out[i] = this.int(lo, hi);
    return out;
  }

  /** Shuffles `items` in place (Fisher-Yates) and returns it. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      const tmp = items[i] as T;
      items[i] = items[j] as T;
      items[j] = tmp;
    }
    return items;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
