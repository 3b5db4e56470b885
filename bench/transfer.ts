/**
 * `bun bench transfer`: the KV transfer data path between two GPUs of one process, on the
 * Qwen3-0.6B KV shape (28 layers, 8 KV heads, head_dim 128, block_size 256: 28 MiB per block in
 * bf16), against the raw link measured in the same run.
 *
 * For each direction and plan size (1, 2, 4, ... 256 blocks) and each path it validates one
 * transfer byte for byte (fresh pattern in the source blocks, checked at the destination), then
 * times warm-up + `--reps` transfers from dispatch to completion (host wall clock around the
 * native enqueue and a spinning wait) and reports p50/p95 ms and GB/s:
 * - raw_copy_engine / raw_nccl: one cudaMemcpyPeerAsync / one ncclSend+Recv of the same bytes
 *   between contiguous buffers: the measured link peak;
 * - nccl: gather + ncclSend/Recv + scatter on a pair communicator (segments pipelined);
 * - copy_engine: gather + cudaMemcpyPeerAsync + scatter (segments pipelined);
 * - kernel: one kernel reading the source blocks and storing into the destination over NVLink;
 * - copy_engine_direct: copy-engine strided copies block to block, no kernels.
 * It prints each path's ratio to the peak and the issue-6 targets (1 block <= 0.25 ms, >= 317 GB/s
 * at 64 blocks, >= 80% of peak from 32 blocks), the gather/scatter kernels alone against the
 * measured HBM copy bandwidth, and writes the latency profile (bench/transfer_profile.ts schema)
 * to --out (default bench/results/transfer-profile.json).
 *
 * GPU run (2 GPUs of one host, e.g. the nvidia-h200-x2 machine), from the repository root:
 *   source .gpu/env.sh && make native-cuda && LMPOOL_BACKEND=cuda bun test test/gpu && bun run bench/main.ts transfer
 * env.sh sets NCCL_NVLS_ENABLE=0 (NVLink multicast stays off; nothing here overrides it) and
 * NCCL_HOME (the build needs NCCL's headers; libnccl.so.2 is loaded at run time).
 * Options: --blocks 1,2,4 --reps 30 --devices 0,1 --segment-mib 0 (0: native rule)
 * --nccl-channels 0 (0: NCCL's choice) --timeout-ms 10000 --out <file> --quick (CPU, tiny shape,
 * pack/unpack only, about a second; writes a profile only with an explicit --out).
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import type { TransferJob } from "../ffi/kv_transfer.ts";
import { Native, type NativeModelConfig } from "../ffi/native.ts";
import { parseModelSpec } from "../lib/model/config.ts";
import { presetConfig } from "../lib/model/presets.ts";
import { intListOption, intOption } from "./cli_options.ts";
import type { BenchEntry } from "./entry.ts";
import { percentile } from "./stats/percentile.ts";
import { type Side, TransferRig } from "./transfer_rig.ts";
import { printKernelTable, printPathTables, printTargets } from "./transfer_table.ts";
import {
  chooseDefaultPath,
  RAW_PATHS,
  TRANSFER_PROFILE_SCHEMA,
  type TransferPairProfile,
  type TransferPathName,
  type TransferProfile,
  type TransferProfilePoint,
} from "./transfer_profile.ts";

/** KV shape of Qwen3-0.6B; weights are never set (only the KV tensor's shape matters). */
const QWEN3_06B_KV: NativeModelConfig = {
  ...parseModelSpec(presetConfig("qwen3-0.6b")).native,
  vocabSize: 1024,
  intermediateSize: 64,
};
const TINY_KV: NativeModelConfig = {
  ...QWEN3_06B_KV,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  hiddenSize: 64,
};

const USAGE = `usage: bun bench transfer [--quick] [--blocks 1,2,...] [--reps N] [--devices a,b]
       [--segment-mib M] [--nccl-channels C] [--timeout-ms T] [--out file.json]`;

/** Timings of repeated transfers, ms. */
function timeRuns(start: () => TransferJob, warmup: number, reps: number, timeoutMs: number, what: string): number[] {
  const out: number[] = [];
  for (let i = 0; i < warmup + reps; i++) {
    const t0 = performance.now();
    const job = start();
    const done = job.waitSync(timeoutMs);
    const ms = performance.now() - t0;
    job.dispose();
    if (!done) throw new Error(`${what}: not complete after ${timeoutMs} ms`);
    if (i >= warmup) out.push(ms);
  }
  return out;
}

function point(blocks: number, bytes: number, ms: number[], validated: boolean | null): TransferProfilePoint {
  const p50 = percentile(ms, 50);
  return {
    blocks,
    bytes,
    p50Ms: p50,
    p95Ms: percentile(ms, 95),
    meanMs: ms.reduce((a, b) => a + b, 0) / ms.length,
    minMs: Math.min(...ms),
    gbps: bytes / (p50 / 1e3) / 1e9,
    samples: ms.length,
    validated,
  };
}

/** Quick form: the gather/scatter kernels of the CPU backend on a tiny shape. */
function runQuick(blocks: number[], reps: number, out: string | undefined): void {
  const native = new Native({ backend: "cpu" });
  const rig = new TransferRig(native, {
    devices: [0, 0],
    config: TINY_KV,
    blockSize: 16,
    maxBlocks: Math.max(...blocks),
    segmentBytes: 0,
    ncclChannels: 0,
    timeoutMs: 10_000,
    nccl: false,
    seed: 1,
  });
  try {
    console.log(
      `transfer --quick on the ${native.backend} backend (${native.path}): pack/unpack of ${rig.blockBytes} B blocks`,
    );
    const copyBw = native.benchCopyBandwidth(1 << 24, 5);
    const rows = blocks.map((n) => ({
      blocks: n,
      bytes: n * rig.blockBytes,
      pack: timeRuns(() => rig.startPack(0, n), 2, reps, 10_000, "pack"),
      unpack: timeRuns(() => rig.startUnpack(0, n), 2, reps, 10_000, "unpack"),
    }));
    printKernelTable(rows, copyBw);
    if (out) writeProfile(out, profileOf(rig, "cpu", [], 0, 0));
  } finally {
    rig.dispose();
  }
}

function profileOf(
  rig: TransferRig,
  backend: "cuda" | "cpu",
  pairs: TransferPairProfile[],
  segmentBytes: number,
  ncclChannels: number,
): TransferProfile {
  const c = rig.o.config;
  return {
    schema: TRANSFER_PROFILE_SCHEMA,
    createdAt: new Date().toISOString(),
    backend,
    shape: {
      numLayers: c.numLayers,
      numKvHeads: c.numKvHeads,
      headDim: c.headDim,
      blockSize: rig.o.blockSize,
      dtype: backend === "cuda" ? "bf16" : "f32",
    },
    bytesPerBlock: rig.blockBytes,
    defaultPath: chooseDefaultPath(pairs),
    segmentBytes,
    ncclChannels,
    pairs,
  };
}

function writeProfile(path: string, profile: TransferProfile): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify(profile, null, 2) + "\n");
  console.log(`\nprofile written to ${path} (default path: ${profile.defaultPath})`);
}

async function run(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      quick: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      out: { type: "string" },
      blocks: { type: "string" },
      reps: { type: "string" },
      devices: { type: "string" },
      "segment-mib": { type: "string" },
      "nccl-channels": { type: "string" },
      "timeout-ms": { type: "string" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const reps = intOption("reps", values.reps, values.quick ? 5 : 30);
  if (values.quick) return runQuick(intListOption("blocks", values.blocks ?? "1,2,4,8"), reps, values.out);

  const blocks = intListOption("blocks", values.blocks ?? "1,2,4,8,16,32,64,128,256");
  const devices = intListOption("devices", values.devices ?? "0,1");
  if (devices.length !== 2 || devices[0] === devices[1]) {
    throw new RangeError(`--devices needs two distinct devices, got ${values.devices}`);
  }
  const segmentBytes = Math.round(Number(values["segment-mib"] ?? 0) * 2 ** 20);
  const ncclChannels = intOption("nccl-channels", values["nccl-channels"], 0, 0);
  const timeoutMs = intOption("timeout-ms", values["timeout-ms"], 10_000);
  const out = values.out ?? "bench/results/transfer-profile.json";

  const native = new Native({ backend: "cuda" });
  const count = native.deviceCount();
  if (count < 2) {
    throw new Error(`bench transfer needs 2 CUDA devices; ${count} visible (run with --quick for the CPU form)`);
  }
  console.log(
    `transfer on the ${native.backend} backend (${native.path}), devices ${devices.join(" <-> ")}, NCCL_NVLS_ENABLE=${
      process.env.NCCL_NVLS_ENABLE ?? "(unset)"
    }`,
  );
  if (process.env.NCCL_NVLS_ENABLE !== "0") {
    console.log("warning: NCCL_NVLS_ENABLE is not 0; source .gpu/env.sh (NVLink multicast must stay off)");
  }
  const rig = new TransferRig(native, {
    devices: [devices[0]!, devices[1]!],
    config: QWEN3_06B_KV,
    blockSize: 256,
    maxBlocks: Math.max(...blocks),
    segmentBytes,
    ncclChannels,
    timeoutMs,
    nccl: true,
    seed: 20261130,
  });
  try {
    const v = rig.xfer.ncclVersion();
    console.log(
      `block: ${(rig.blockBytes / 2 ** 20).toFixed(2)} MiB; NCCL: ${
        "version" in v ? v.version : `unavailable (${v.unavailable})`
      }; segments: ${segmentBytes ? `${segmentBytes} B` : "native default rule"}; reps ${reps}`,
    );
    native.setDevice(devices[0]!);
    const copyBw = native.benchCopyBandwidth(2 ** 31, 10);
    printKernelTable(
      blocks.map((n) => ({
        blocks: n,
        bytes: n * rig.blockBytes,
        pack: timeRuns(() => rig.startPack(0, n), 3, reps, timeoutMs, "pack"),
        unpack: timeRuns(() => rig.startUnpack(0, n), 3, reps, timeoutMs, "unpack"),
      })),
      copyBw,
    );

    const pairs: TransferPairProfile[] = [];
    let seed = 1n, failures = 0;
    for (const src of [0, 1] as Side[]) {
      const pair: TransferPairProfile = { srcDevice: devices[src]!, dstDevice: devices[1 - src]!, paths: [] };
      for (const path of rig.paths()) {
        const raw = (RAW_PATHS as readonly string[]).includes(path);
        const points = blocks.map((n) => {
          let validated: boolean | null = null;
          if (!raw) {
            const bad = rig.validate(path, src, n, seed++);
            validated = bad === 0;
            if (bad) {
              failures++;
              console.error(
                `VALIDATION FAILED: ${path} ${pair.srcDevice} -> ${pair.dstDevice}, ${n} blocks: ${bad} words differ`,
              );
            }
          }
          const ms = timeRuns(() => rig.start(path, src, n), 3, reps, timeoutMs, `${path} ${n} blocks`);
          return point(n, n * rig.blockBytes, ms, validated);
        });
        pair.paths.push({ path: path as TransferPathName, points });
      }
      pairs.push(pair);
      printPathTables(pair);
    }
    if (rig.ncclUnavailable) console.log(`\nNCCL paths skipped: ${rig.ncclUnavailable}`);
    printTargets(pairs);
    writeProfile(out, profileOf(rig, "cuda", pairs, segmentBytes, ncclChannels));
    if (failures) throw new Error(`${failures} transfers were not byte-exact`);
  } finally {
    rig.dispose();
  }
}

const entry: BenchEntry = {
  name: "transfer",
  description: "KV transfer between 2 GPUs (NCCL, copy engine, kernel) vs the raw link peak measured in the same run",
  run,
};
export default entry;
