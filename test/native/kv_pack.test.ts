// Packed KV transfer primitives through ffi/kv_transfer.ts: device-buffer pack/unpack equal the
// host gather/scatter byte for byte, the validation pattern detects any changed word, same-process
// peer copies move exactly the listed blocks (every mode), the segment rule, argument checks in
// both TypeScript and C, and the NCCL/IPC calls saying why they are unavailable on the CPU backend.
import { describe, expect, test } from "bun:test";
import { DisposedError, NativeError } from "../../lib/core/errors.ts";
import { KvTransferEngine, type PeerCopyModeName } from "../../ffi/kv_transfer.ts";
import { native } from "../../ffi/native.ts";
import { rng } from "../helpers/bf16.ts";
import { testSeed, tinyConfig } from "../helpers/random_model.ts";

const lib = native();
const xfer = new KvTransferEngine(lib);
// KV tensors need only the model's shape: no weights are set.
const model = lib.createModel(
  tinyConfig({ arch: "qwen3", tie: true, seed: 1, numLayers: 3, numKvHeads: 2, headDim: 16 }),
);

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a).equals(Buffer.from(b));
}

describe(`KV pack/unpack and transfer primitives (${lib.backend} backend)`, () => {
  const seed = testSeed();
  const ctx = `seed ${seed} (replay: LP_TEST_SEED=${seed})`;
  const rand = rng(seed ^ 0x7061636b);
  const randomBytes = (n: number) => new Uint8Array(n).map(() => Math.floor(rand() * 256));

  test("device buffers: size from the library, write/read round trip, range checks, dispose", () => {
    const buf = xfer.allocBuffer(0, 4096);
    expect(buf.bytes).toBe(4096); // lp_dev_buffer_bytes
    const data = randomBytes(1000);
    buf.write(96, data);
    expect(equalBytes(buf.read(96, 1000), data)).toBe(true);
    expect(() => buf.read(4000, 200)).toThrow(NativeError);
    expect(() => buf.read(4000, 200)).toThrow(/outside the 4096-byte buffer/);
    buf.dispose();
    buf.dispose();
    expect(() => buf.read(0, 1)).toThrow(DisposedError);
  });

  test("pack equals the host gather and unpack equals the host scatter, byte for byte", () => {
    using kv = model.createKvCache(12, 16);
    kv.scatter(Int32Array.from({ length: 12 }, (_, i) => i), randomBytes(12 * kv.blockBytes));
    const ids = Int32Array.of(9, 2, 7, 4);
    using buf = xfer.allocBuffer(0, ids.length * kv.blockBytes + 64);
    using packJob = xfer.pack(kv, ids, buf);
    expect(packJob.waitSync(10_000)).toBe(true);
    const packed = buf.read(0, ids.length * kv.blockBytes);
    if (!equalBytes(packed, kv.gather(ids))) throw new Error(`${ctx}: lp_kv_pack differs from lp_kv_gather_host`);

    const payload = randomBytes(ids.length * kv.blockBytes);
    buf.write(0, payload);
    const targets = Int32Array.of(1, 11, 6, 0), keep = [3, 5, 8, 10];
    const before = keep.map((id) => kv.gather(Int32Array.of(id)));
    using unpackJob = xfer.unpack(kv, targets, buf);
    expect(unpackJob.waitSync(10_000)).toBe(true);
    if (!equalBytes(kv.gather(targets), payload)) throw new Error(`${ctx}: unpack wrote wrong bytes`);
    keep.forEach((id, i) => {
      if (!equalBytes(kv.gather(Int32Array.of(id)), before[i]!)) {
        throw new Error(`${ctx}: block ${id} changed though not unpacked into`);
      }
    });
  });

  test("the pattern check is exact: 0 after fill, and one changed word is found", () => {
    using kv = model.createKvCache(6, 16);
    const ids = [4, 1, 5];
    xfer.fillPattern(kv, ids, 42n);
    expect(xfer.countPatternMismatches(kv, ids, 42n)).toBe(0);
    expect(xfer.countPatternMismatches(kv, ids, 43n)).toBeGreaterThan(0);
    // The pattern follows the list order: the same blocks in another order do not match.
    expect(xfer.countPatternMismatches(kv, [1, 4, 5], 42n)).toBeGreaterThan(0);
    const one = kv.gather(Int32Array.of(5));
    one[one.length - 3] = one[one.length - 3]! ^ 0x10;
    kv.scatter(Int32Array.of(5), one);
    expect(xfer.countPatternMismatches(kv, ids, 42n)).toBe(1);
  });

  for (const mode of ["copyEngine", "kernel", "copyEngineDirect"] as PeerCopyModeName[]) {
    test(`peer copy (${mode}) moves exactly the listed blocks`, () => {
      using src = model.createKvCache(10, 16);
      using dst = model.createKvCache(7, 16);
      const srcIds = [8, 0, 3], dstIds = [2, 6, 5];
      xfer.fillPattern(src, srcIds, 7n);
      dst.scatter(Int32Array.from({ length: 7 }, (_, i) => i), randomBytes(7 * dst.blockBytes));
      const others = Int32Array.of(0, 1, 3, 4);
      const before = dst.gather(others);
      using job = xfer.peerCopy(src, srcIds, dst, dstIds, mode);
      expect(job.waitSync(10_000)).toBe(true);
      expect(job.done()).toBe(true);
      const bad = xfer.countPatternMismatches(dst, dstIds, 7n);
      if (bad !== 0) throw new Error(`${ctx}: ${bad} words differ after a ${mode} peer copy`);
      if (!equalBytes(dst.gather(others), before)) throw new Error(`${ctx}: ${mode} peer copy touched other blocks`);
    });
  }

  test("the segment rule: whole chunks, the default for small payloads, overrides", () => {
    using kv = model.createKvCache(4, 16);
    const chunk = kv.blockBytes / (2 * 3);
    // A tiny payload is far below 8 MiB: one segment holds all of it.
    expect(xfer.segmentBytes(kv, 3)).toBe(3 * kv.blockBytes);
    expect(xfer.segmentBytes(kv, 3, 2 * chunk + 5)).toBe(2 * chunk);
    expect(xfer.segmentBytes(kv, 3, 1)).toBe(chunk);
  });

  test("bad arguments fail in TypeScript and, past it, in C with the value named", () => {
    using kv = model.createKvCache(4, 16);
    using small = xfer.allocBuffer(0, 16);
    expect(() => xfer.pack(kv, [4], small)).toThrow(RangeError);
    expect(() => xfer.pack(kv, [], small)).toThrow(RangeError);
    expect(() => xfer.pack(kv, [1], small)).toThrow(/do not fit/);
    using big = xfer.allocBuffer(0, 4 * kv.blockBytes);
    const out = new BigUint64Array(1);
    expect(lib.symbols.lp_kv_pack(kv.handle, Int32Array.of(2, 9), 2, big.handle, out)).toBe(-1);
    expect(lib.lastError()).toMatch(/block id 9 \(index 1\) out of range \[0, 4\)/);
    expect(lib.symbols.lp_kv_unpack(kv.handle, Int32Array.of(1), 1, small.handle, out)).toBe(-1);
    expect(lib.lastError()).toMatch(/need \d+ bytes; the buffer has 16/);
    expect(lib.symbols.lp_xfer_wait(0n, -1)).toBe(-1);
  });

  test.if(lib.backend === "cpu")("NCCL and CUDA IPC say why they are unavailable on the CPU backend", () => {
    const v = xfer.ncclVersion();
    expect("unavailable" in v && v.unavailable).toMatch(/CPU backend has no NCCL/);
    expect(() => xfer.ncclUniqueId()).toThrow(NativeError);
    try {
      xfer.createLocalPair(0, 1, { timeoutMs: 1000 });
      throw new Error("createLocalPair should fail on the CPU backend");
    } catch (e) {
      expect(e).toBeInstanceOf(NativeError);
      expect((e as NativeError).status).toBe(-6);
    }
    using kv = model.createKvCache(2, 16);
    expect(() => xfer.exportKv(kv)).toThrow(/CUDA IPC/);
  });
});
