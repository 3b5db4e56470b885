/**
 * The two small worker-to-worker signals of a CUDA IPC transfer (lib/transfer/paths/ipc/ipc_data_path.ts):
 * - ready (destination -> source): the destination is waiting for this plan, so its reserved
 *   blocks stay reserved until the source reports; only then may the source write into them. It
 *   names those blocks, so a source whose execute came before the destination's prepare answer
 *   (pipelined phases) learns them from the destination itself;
 * - done (source -> destination): the copy completed (every byte landed), or `error` says why
 *   nothing more will be written (not copied, copy failed).
 * They travel as frames of the workers' KV peer channel (lib/transfer/paths/host/kv_peer_channel.ts) with the plan
 * id plus a suffix that no plan id has, so they never reach the host path's mailbox.
 * @module
 */
import type { KvPeerChannel } from "../host/kv_peer_channel.ts";

/** A signal about one plan. */
export type IpcSignal = { kind: "ready"; planId: string; dstBlocks: Int32Array } | {
  kind: "done";
  planId: string;
  error?: string;
};

/** Sends signals to peers and delivers theirs (a KvPeerChannel underneath; in memory in tests). */
export interface IpcSignalLine {
  /** Resolves once handed to the transport; rejects when it is closed. */
  send(peerRank: number, signal: IpcSignal): Promise<void>;
  /** Sets the handler of arriving signals (one per line). */
  listen(handler: (fromRank: number, signal: IpcSignal) => void): void;
}

const SUFFIX = { ready: "\u0000ipc-ready", done: "\u0000ipc-done" } as const;
const OK = 1;
const FAILED = 0;

/**
 * IPC signals as frames of `channel` (payload of ready: the block ids as little-endian int32; of
 * done: one status byte, then the error in UTF-8).
 */
export function ipcSignalsOverChannel(channel: KvPeerChannel): IpcSignalLine {
  return {
    send: (peerRank, signal) => {
      if (signal.kind === "ready") {
        return channel.send(signal.planId + SUFFIX.ready, peerRank, int32Bytes(signal.dstBlocks));
      }
      const error = signal.error === undefined ? new Uint8Array(0) : new TextEncoder().encode(signal.error);
      const payload = new Uint8Array(1 + error.length);
      payload[0] = signal.error === undefined ? OK : FAILED;
      payload.set(error, 1);
      return channel.send(signal.planId + SUFFIX.done, peerRank, payload);
    },
    listen: (handler) => {
      const planOf = (key: string, suffix: string) => key.slice(0, key.length - suffix.length);
      channel.divert(SUFFIX.ready, (from, key, payload) => {
        const planId = planOf(key, SUFFIX.ready);
        // A malformed list names no block: the source then refuses the copy (its block count differs).
        handler(from, {
          kind: "ready",
          planId,
          dstBlocks: payload.length % 4 === 0 ? int32sOf(payload) : new Int32Array(0),
        });
      });
      channel.divert(SUFFIX.done, (from, key, payload) => {
        const planId = planOf(key, SUFFIX.done);
        if (payload[0] === OK && payload.length === 1) return handler(from, { kind: "done", planId });
        const error = payload[0] === FAILED
          ? new TextDecoder().decode(payload.subarray(1))
          : `malformed done signal (${payload.length} bytes, status ${payload[0]})`;
        handler(from, { kind: "done", planId, error });
      });
    },
  };
}

/** Little-endian bytes of `ids` (a copy: the frame outlives the caller's array). */
function int32Bytes(ids: Int32Array): Uint8Array {
  const out = new Uint8Array(ids.length * 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < ids.length; i++) view.setInt32(i * 4, ids[i]!, true);
  return out;
}

function int32sOf(bytes: Uint8Array): Int32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Int32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt32(i * 4, true);
  return out;
}
