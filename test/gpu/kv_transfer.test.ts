// KV transfer between two GPUs of one process: every path (NCCL local pair, copy engine, kernel,
// copy engine direct) in both directions moves exactly the listed blocks byte for byte, with
// default and tiny segments (many more segments than staging slots), for 1 to 37 blocks;
// transfers in both directions at once; device pack/unpack equal the host gather/scatter; the raw
// baselines move bytes exactly. Skips (and says why) without the CUDA backend and 2 devices.
import { describe, expect, test } from "bun:test";
import { DisposedError } from "../../lib/core/errors.ts";
import { KvTransferEngine, type LocalNcclPair, type TransferJob } from "../../ffi/kv_transfer.ts";
import type { KvCache, Native } from "../../ffi/native.ts";
import { rng } from "../helpers/bf16.ts";
import { shuffledBlocks } from "../helpers/step_builder.ts";
import { testSeed, tinyConfig } from "../helpers/random_model.ts";
import { openBackends } from "./cuda_backends.ts";

const backends = openBackends();
const skip = "skip" in backends
  ? backends.skip
  : backends.cuda.deviceCount() < 2
  ? `needs 2 CUDA devices, ${backends.cuda.deviceCount()} visible`
  : null;
if (skip && !("skip" in backends)) console.log(`test/gpu/kv_transfer: skipping, ${skip}`);

type Path = "nccl" | "copyEngine" | "kernel" | "copyEngineDirect";

describe("KV transfer between two GPUs of one process", () => {
  if (skip || "skip" in backends) {
    test.skip(`skipped: ${skip}`, () => {});
    return;
  }
  const cuda: Native = backends.cuda;
  const xfer = new KvTransferEngine(cuda);
  const seed = testSeed();
  const ctx = `seed ${seed} (replay: LP_TEST_SEED=${seed})`;
  const rand = rng(seed ^ 0x78666572);
  // 4 layers x 2 heads x 128 x 16 tokens: 8 KiB chunks, 64 KiB blocks.
  const config = tinyConfig({
    arch: "qwen3",
    tie: true,
    seed: 1,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 128,
  });
  const kv: KvCache[] = [0, 1].map((d) => {
    cuda.setDevice(d);
    return cuda.createModel(config).createKvCache(96, 16);
  });
  const chunk = kv[0]!.blockBytes / (2 * config.numLayers);
  const version = xfer.ncclVersion();
  let pair: LocalNcclPair | null = null, pairError: unknown = null;
  if ("version" in version) {
    try {
      pair = xfer.createLocalPair(0, 1, { timeoutMs: 30_000 });
    } catch (e) {
      pairError = e;
    }
  } else {
    console.log(`test/gpu/kv_transfer: NCCL paths skipped (${version.unavailable})`);
  }

  test.if("version" in version)("NCCL is loaded and a local pair is created and warmed", () => {
    if (pairError) throw pairError;
    expect(pair).not.toBeNull();
  });

  function start(path: Path, src: 0 | 1, srcIds: number[], dstIds: number[], segmentBytes: number): TransferJob {
    const s = kv[src]!, d = kv[1 - src]!;
    if (path === "nccl") return pair!.transfer(src, s, srcIds, d, dstIds, segmentBytes);
    return xfer.peerCopy(s, srcIds, d, dstIds, path, segmentBytes);
  }

  /** Transfers srcIds -> dstIds and checks the destination and that other destination blocks kept their bytes. */
  function checkTransfer(path: Path, src: 0 | 1, n: number, segmentBytes: number): void {
    const s = kv[src]!, d = kv[1 - src]!;
    const srcIds = shuffledBlocks(rand, s.numBlocks, n), dstIds = shuffledBlocks(rand, d.numBlocks, n + 3);
    const others = dstIds.splice(n, 3);
    const pat = BigInt(Math.floor(rand() * 2 ** 52));
    xfer.fillPattern(s, srcIds, pat);
    xfer.fillPattern(d, others, pat + 1n);
    using job = start(path, src, srcIds, dstIds, segmentBytes);
    expect(job.waitSync(20_000)).toBe(true);
    const what = `${path} ${src}->${1 - src}, ${n} blocks, segment ${segmentBytes || "default"}, ${ctx}`;
    const bad = xfer.countPatternMismatches(d, dstIds, pat);
    if (bad !== 0) throw new Error(`${what}: ${bad} words differ`);
    if (xfer.countPatternMismatches(d, others, pat + 1n) !== 0) throw new Error(`${what}: other blocks changed`);
    if (xfer.countPatternMismatches(s, srcIds, pat) !== 0) throw new Error(`${what}: source blocks changed`);
  }

  const paths: Path[] = pair
    ? ["nccl", "copyEngine", "kernel", "copyEngineDirect"]
    : ["copyEngine", "kernel", "copyEngineDirect"];
  for (const path of paths) {
    test(`${path}: byte-exact in both directions, 1..37 blocks, default and 3-chunk segments`, () => {
      for (const src of [0, 1] as const) {
        for (const n of [1, 5, 37]) {
          for (const segmentBytes of [0, 3 * chunk]) checkTransfer(path, src, n, segmentBytes);
        }
      }
    });
  }

  test("same-device copies (all peer modes) on device 0", () => {
    for (const mode of ["copyEngine", "kernel", "copyEngineDirect"] as const) {
      const ids = shuffledBlocks(rand, 96, 12);
      const from = ids.slice(0, 6), to = ids.slice(6);
      xfer.fillPattern(kv[0]!, from, 99n);
      using job = xfer.peerCopy(kv[0]!, from, kv[0]!, to, mode, 2 * chunk);
      expect(job.waitSync(20_000)).toBe(true);
      expect(xfer.countPatternMismatches(kv[0]!, to, 99n)).toBe(0);
    }
  });

  test("transfers in both directions at once complete and are exact", () => {
    const a = shuffledBlocks(rand, 96, 40), b = shuffledBlocks(rand, 96, 40);
    const jobs: TransferJob[] = [];
    xfer.fillPattern(kv[0]!, a.slice(0, 20), 11n);
    xfer.fillPattern(kv[1]!, b.slice(0, 20), 12n);
    for (const path of paths) {
      jobs.push(start(path, 0, a.slice(0, 20), b.slice(20), 4 * chunk));
      jobs.push(start(path, 1, b.slice(0, 20), a.slice(20), 4 * chunk));
      for (const j of jobs.splice(0)) {
        expect(j.waitSync(20_000)).toBe(true);
        j.dispose();
      }
      expect(xfer.countPatternMismatches(kv[1]!, b.slice(20), 11n)).toBe(0);
      expect(xfer.countPatternMismatches(kv[0]!, a.slice(20), 12n)).toBe(0);
    }
  });

  test("device pack/unpack equal the host gather/scatter; raw baselines copy bytes exactly", () => {
    const ids = shuffledBlocks(rand, 96, 7);
    const payload = new Uint8Array(7 * kv[0]!.blockBytes).map(() => Math.floor(rand() * 256));
    kv[0]!.scatter(Int32Array.from(ids), payload);
    using b0 = xfer.allocBuffer(0, payload.length), b1 = xfer.allocBuffer(1, payload.length);
    xfer.pack(kv[0]!, ids, b0).dispose(); // releasing a job before it completes is allowed
    using packed = xfer.pack(kv[0]!, ids, b0);
    expect(packed.waitSync(20_000)).toBe(true);
    expect(Buffer.from(b0.read(0, payload.length)).equals(Buffer.from(payload))).toBe(true);
    using copy = xfer.copyBuffer(b1, b0, payload.length);
    expect(copy.waitSync(20_000)).toBe(true);
    expect(Buffer.from(b1.read(0, payload.length)).equals(Buffer.from(payload))).toBe(true);
    const dstIds = shuffledBlocks(rand, 96, 7);
    using unpacked = xfer.unpack(kv[1]!, dstIds, b1);
    expect(unpacked.waitSync(20_000)).toBe(true);
    expect(Buffer.from(kv[1]!.gather(Int32Array.from(dstIds))).equals(Buffer.from(payload))).toBe(true);
    if (pair) {
      b1.write(0, new Uint8Array(payload.length));
      using raw = pair.sendRecvRaw(0, b0, b1, payload.length);
      expect(raw.waitSync(20_000)).toBe(true);
      expect(Buffer.from(b1.read(0, payload.length)).equals(Buffer.from(payload))).toBe(true);
    }
  });

  test("a local pair refuses a cache on the wrong device with a clear error", () => {
    if (!pair) return;
    expect(() => pair.transfer(0, kv[1]!, [1], kv[0]!, [2])).toThrow(/KV cache on device 1, pair rank 0 on device 0/);
  });

  test("dispose releases the pair and the caches", () => {
    pair?.dispose();
    pair?.dispose();
    if (pair) expect(() => pair.transfer(0, kv[0]!, [1], kv[1]!, [2])).toThrow(DisposedError);
    for (const k of kv) k.dispose();
  });
});
