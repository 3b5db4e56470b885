/**
 * KV transfer figures for the cluster simulator while no two GPUs are lent to measure them again:
 * the ones measured earlier on 2 x H200 over NVLink with Qwen3-0.6B blocks of 256 tokens (one block
 * copied in 0.084 ms, 64 blocks at 375 GB/s, a link ceiling of about 396 GB/s, and 0.64-0.93 ms
 * from dispatch to publish for one block, control messages included). Every table that uses them
 * says so through `source`.
 *
 * Copy time is latency + bytes / bandwidth, the line through the one-block and the many-block
 * figure, and never faster than the link ceiling allows. Dispatch to publish adds the control
 * protocol's own time (prepare, execute and publish acks), taken as the midpoint of the measured
 * one-block range minus that block's copy time, and constant in the payload's size.
 * @module
 */

/** Measured transfer figures (the fields the fit starts from) and where they come from. */
export interface TransferDefaults {
  /** Where the figures come from; printed beside every table that uses them. */
  source: string;
  /** Bytes of one KV block in the measurements. */
  blockBytes: number;
  /** Copy time of one block, ms. */
  oneBlockMs: number;
  /** Blocks of the large measured copy. */
  manyBlocks: number;
  /** Rate of that copy, GB/s (1e9 bytes per second). */
  manyBlocksGBps: number;
  /** The link's ceiling, GB/s: no copy is modelled faster. */
  linkCeilingGBps: number;
  /** Dispatch to publish of a one-block plan, ms: fastest and slowest seen. */
  dispatchToPublishOneBlockMs: { min: number; max: number };
}

/** Qwen3-0.6B's KV bytes of one 256-token block: 28 layers x (K, V) x 8 heads x 128 dims x 2 bytes x 256 tokens. */
const QWEN3_06B_BLOCK_BYTES = 28 * 2 * 8 * 128 * 2 * 256;

/** The figures measured on 2 x H200 over NVLink (see the module doc). */
export const H200_NVLINK_TRANSFER: TransferDefaults = {
  source: "measured earlier on 2 x H200 over NVLink (Qwen3-0.6B, 256-token blocks), not in this run",
  blockBytes: QWEN3_06B_BLOCK_BYTES,
  oneBlockMs: 0.084,
  manyBlocks: 64,
  manyBlocksGBps: 375,
  linkCeilingGBps: 396,
  dispatchToPublishOneBlockMs: { min: 0.64, max: 0.93 },
};

/** The copy-time line fitted to the two figures: latency ms and bytes per ms. */
export function transferLine(t: TransferDefaults): { latencyMs: number; bytesPerMs: number } {
  const x1 = t.blockBytes, y1 = t.oneBlockMs;
  const x2 = t.manyBlocks * t.blockBytes, y2 = x2 / (t.manyBlocksGBps * 1e6);
  const msPerByte = (y2 - y1) / (x2 - x1);
  if (!(msPerByte > 0)) {
    throw new RangeError(
      `transfer figures give no positive bandwidth: ${t.oneBlockMs} ms for 1 block and ${t.manyBlocksGBps} GB/s for ${t.manyBlocks}`,
    );
  }
  return { latencyMs: Math.max(0, y1 - x1 * msPerByte), bytesPerMs: 1 / msPerByte };
}

/** Modelled copy time of `bytes` between two linked GPUs, ms. */
export function transferMs(t: TransferDefaults, bytes: number): number {
  if (!(Number.isFinite(bytes) && bytes >= 0)) throw new RangeError(`transfer bytes must be >= 0, got ${bytes}`);
  if (bytes === 0) return 0;
  const { latencyMs, bytesPerMs } = transferLine(t);
  return Math.max(latencyMs + bytes / bytesPerMs, bytes / (t.linkCeilingGBps * 1e6));
}

/** Modelled time from a plan's dispatch to its publish for a payload of `bytes`, ms. */
export function dispatchToPublishMs(t: TransferDefaults, bytes: number): number {
  const d = t.dispatchToPublishOneBlockMs;
  const protocolMs = Math.max(0, (d.min + d.max) / 2 - transferMs(t, t.blockBytes));
  return protocolMs + transferMs(t, bytes);
}
