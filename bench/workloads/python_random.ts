/**
 * Python's `random` module for the two calls the compact-engine throughput workload makes:
 * `random.seed(int)` and `random.randint(a, b)`. Mersenne Twister MT19937 seeded with
 * init_by_array over the seed's 32-bit words, randint by rejection sampling on getrandbits(k),
 * exactly as CPython does, so `random.seed(0)` here reproduces the published workload token for token.
 * @module
 */

const N = 624;
const M = 397;

/** CPython-compatible random.seed/randint/getrandbits. */
export class PythonRandom {
  #mt = new Uint32Array(N);
  #index = N + 1;

  constructor(seed: number) {
    if (!Number.isSafeInteger(seed)) throw new RangeError(`seed must be a safe integer, got ${String(seed)}`);
    // CPython seeds from |seed| split into 32-bit words, least significant first ([0] for 0).
    let s = Math.abs(seed);
    const key: number[] = [];
    do {
      key.push(s % 2 ** 32);
      s = Math.floor(s / 2 ** 32);
    } while (s > 0);
    this.#initByArray(key);
  }

  #initGenrand(s: number): void {
    const mt = this.#mt;
    mt[0] = s >>> 0;
    for (let i = 1; i < N; i++) {
      const prev = (mt[i - 1] as number) ^ ((mt[i - 1] as number) >>> 30);
      mt[i] = (Math.imul(1812433253, prev) + i) >>> 0;
    }
    this.#index = N;
  }

  #initByArray(key: number[]): void {
    const mt = this.#mt;
    this.#initGenrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      const prev = (mt[i - 1] as number) ^ ((mt[i - 1] as number) >>> 30);
      mt[i] = (((mt[i] as number) ^ Math.imul(prev, 1664525)) + (key[j] as number) + j) >>> 0;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1] as number;
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const prev = (mt[i - 1] as number) ^ ((mt[i - 1] as number) >>> 30);
      mt[i] = (((mt[i] as number) ^ Math.imul(prev, 1566083941)) - i) >>> 0;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1] as number;
        i = 1;
      }
    }
    mt[0] = 0x80000000;
  }

  #twist(): void {
    const mt = this.#mt;
    for (let k = 0; k < N; k++) {
      const y = ((mt[k] as number) & 0x80000000) | ((mt[(k + 1) % N] as number) & 0x7fffffff);
      mt[k] = ((mt[(k + M) % N] as number) ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0)) >>> 0;
    }
    this.#index = 0;
  }

  /** Next tempered 32-bit output (genrand_uint32). */
  nextUint32(): number {
    if (this.#index >= N) this.#twist();
    let y = this.#mt[this.#index++] as number;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** random.getrandbits(k) for 1 <= k <= 32. */
  getrandbits(k: number): number {
    if (!Number.isInteger(k) || k < 1 || k > 32) throw new RangeError(`getrandbits supports 1..32 bits here, got ${k}`);
    return this.nextUint32() >>> (32 - k);
  }

  /** random.randint(a, b): uniform integer in [a, b], both inclusive (range below 2^32). */
  randint(a: number, b: number): number {
    const n = b - a + 1;
    if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b) || n < 1 || n > 2 ** 32) {
      throw new RangeError(`randint range must be integers a <= b spanning at most 2^32, got [${a}, ${b}]`);
    }
    const k = Math.floor(Math.log2(n)) + 1; // n.bit_length()
    let r = this.getrandbits(Math.min(k, 32));
    while (r >= n) r = this.getrandbits(Math.min(k, 32));
    return a + r;
  }
}
