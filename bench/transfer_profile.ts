/**
 * The transfer latency profile: what `bun bench transfer` writes (bench/results/transfer-profile.json)
 * and the cost model reads. Per logical pair and direction, per data path, per plan size in
 * blocks: p50/p95 wall time from dispatch to completion of the whole native transfer (gather,
 * link and scatter for full paths; a plain copy of the same bytes for raw_* baselines).
 * @module
 */

/** Schema id; bump when a field changes meaning. */
export const TRANSFER_PROFILE_SCHEMA = "lmpool.transfer-profile/v1";

/** Full data paths (gather + link + scatter): the ones a transfer executor can use. */
export const FULL_PATHS = ["nccl", "copy_engine", "kernel", "copy_engine_direct"] as const;
/** A full data path. nccl: packed NCCL pair; copy_engine: pack, cudaMemcpyPeerAsync, unpack;
 * kernel: one kernel storing over NVLink; copy_engine_direct: strided copy-engine copies only. */
export type FullPathName = (typeof FULL_PATHS)[number];
/** Raw link baselines: one plain copy of the same bytes between contiguous buffers. */
export const RAW_PATHS = ["raw_copy_engine", "raw_nccl"] as const;
/** A raw link baseline. */
export type RawPathName = (typeof RAW_PATHS)[number];
/** Any measured path. */
export type TransferPathName = FullPathName | RawPathName;

/** Paths usable between two worker processes (copy_engine needs both devices in one process;
 * kernel and copy_engine_direct work across processes through a CUDA IPC view). */
export const CROSS_PROCESS_PATHS: readonly FullPathName[] = ["nccl", "kernel", "copy_engine_direct"];

/** One plan size of one path. */
export interface TransferProfilePoint {
  blocks: number;
  bytes: number;
  p50Ms: number;
  p95Ms: number;
  meanMs: number;
  minMs: number;
  /** bytes / p50, in 1e9 bytes per second. */
  gbps: number;
  samples: number;
  /** Byte-exact validation passed before timing (null: raw baselines, not validated). */
  validated: boolean | null;
}

/** One path's curve on one directed pair, points ascending by blocks. */
export interface TransferPathCurve {
  path: TransferPathName;
  points: TransferProfilePoint[];
}

/** One directed logical pair (device ids after CUDA_VISIBLE_DEVICES remapping). */
export interface TransferPairProfile {
  srcDevice: number;
  dstDevice: number;
  paths: TransferPathCurve[];
}

/** The whole profile. */
export interface TransferProfile {
  schema: typeof TRANSFER_PROFILE_SCHEMA;
  createdAt: string;
  backend: "cuda" | "cpu";
  shape: { numLayers: number; numKvHeads: number; headDim: number; blockSize: number; dtype: "bf16" | "f32" };
  /** KV bytes of one block over all layers, K and V: the serving model must match it. */
  bytesPerBlock: number;
  /** Fastest cross-process full path over the measured sizes (see chooseDefaultPath). */
  defaultPath: FullPathName;
  /** Segment size used (0: the native default rule) and NCCL channel pin (0: NCCL's choice). */
  segmentBytes: number;
  ncclChannels: number;
  pairs: TransferPairProfile[];
}

function fail(field: string, want: string, got: unknown): never {
  throw new TypeError(`transfer profile: ${field} must be ${want}, got ${JSON.stringify(got)}`);
}

/** Checks a parsed JSON value against the schema; returns it typed or throws a TypeError naming the field. */
export function parseTransferProfile(x: unknown): TransferProfile {
  const p = x as TransferProfile;
  if (!p || typeof p !== "object") fail("the profile", "an object", x);
  if (p.schema !== TRANSFER_PROFILE_SCHEMA) fail("schema", JSON.stringify(TRANSFER_PROFILE_SCHEMA), p.schema);
  if (!(p.bytesPerBlock > 0)) fail("bytesPerBlock", "a positive number", p.bytesPerBlock);
  if (!(FULL_PATHS as readonly string[]).includes(p.defaultPath)) {
    fail("defaultPath", FULL_PATHS.join("|"), p.defaultPath);
  }
  if (!Array.isArray(p.pairs)) fail("pairs", "an array", p.pairs);
  p.pairs.forEach((pair, i) => {
    if (!Number.isInteger(pair.srcDevice) || !Number.isInteger(pair.dstDevice)) {
      fail(`pairs[${i}] devices`, "integers", pair);
    }
    pair.paths.forEach((curve, j) => {
      const at = `pairs[${i}].paths[${j}]`;
      if (!([...FULL_PATHS, ...RAW_PATHS] as readonly string[]).includes(curve.path)) {
        fail(`${at}.path`, "a known path", curve.path);
      }
      let last = 0;
      for (const pt of curve.points) {
        if (!(pt.blocks > last) || !(pt.p95Ms >= 0) || !(pt.p50Ms >= 0)) {
          fail(`${at}.points`, "ascending blocks with p50Ms/p95Ms >= 0", pt);
        }
        last = pt.blocks;
      }
    });
  });
  return p;
}

/**
 * The cross-process full path with the smallest geometric mean of p95 / (best p95 at that size)
 * over every measured pair and size: the fastest one across plan sizes, not at one size only.
 */
export function chooseDefaultPath(pairs: readonly TransferPairProfile[]): FullPathName {
  const score = new Map<FullPathName, { logSum: number; count: number }>();
  for (const pair of pairs) {
    const sizes = new Set(pair.paths.flatMap((c) => c.points.map((p) => p.blocks)));
    for (const blocks of sizes) {
      const at = CROSS_PROCESS_PATHS.flatMap((path) => {
        const pt = pair.paths.find((c) => c.path === path)?.points.find((p) => p.blocks === blocks);
        return pt ? [{ path, p95: pt.p95Ms }] : [];
      });
      const best = Math.min(...at.map((x) => x.p95));
      for (const { path, p95 } of at) {
        const s = score.get(path) ?? { logSum: 0, count: 0 };
        s.logSum += Math.log(p95 / best);
        s.count++;
        score.set(path, s);
      }
    }
  }
  let choice: FullPathName = "nccl", bestScore = Infinity;
  for (const [path, s] of score) {
    const g = s.logSum / s.count;
    if (g < bestScore) [choice, bestScore] = [path, g];
  }
  return choice;
}

/** The profile as chart points: p95 latency per plan size, one series per directed pair and path. */
export function profileLatencyPoints(
  p: TransferProfile,
): { pair: string; blocks: number; bytes: number; latencyMs: number }[] {
  return p.pairs.flatMap((pair) =>
    pair.paths.flatMap((curve) =>
      curve.points.map((pt) => ({
        pair: `${pair.srcDevice}->${pair.dstDevice} ${curve.path}`,
        blocks: pt.blocks,
        bytes: pt.bytes,
        latencyMs: pt.p95Ms,
      }))
    )
  );
}
