/**
 * What the direct device paths (device-local and cross-device CUDA IPC, NCCL) share: a path that
 * can give up one peer (the worker then moves that peer to the host path), a posted half of a
 * transfer, the timeout error, and a pair's name in log lines and errors.
 * @module
 */
import type { KvDataPath } from "./kv_data_path.ts";

/** A direct path that can give up one peer (IpcDataPath, NcclDataPath). */
export interface DirectDataPath extends KvDataPath {
  dropPeer(peer: number, reason: string): void;
}

/** A posted half of a transfer (ffi/kv_transfer.ts TransferJob has this shape). */
export interface PendingTransfer {
  /** Resolves true when complete, false on timeout; rejects when the transfer failed. */
  wait(timeoutMs: number): Promise<boolean>;
  dispose(): void;
}

/** A plan's transfer did not finish within the data path's timeout. */
export class TransferTimeoutError extends Error {
  override readonly name = "TransferTimeoutError";
}

/** "a-b" with the lower rank first. */
export function pairName(a: number, b: number): string {
  return `${Math.min(a, b)}-${Math.max(a, b)}`;
}
