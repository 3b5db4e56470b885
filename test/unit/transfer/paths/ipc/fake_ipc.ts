// Test doubles of the CUDA IPC data path's parts: a mapped peer cache whose copies land (write the
// destination's "memory") only when completed, an exporter/mapper, and an in-memory signal line.
import type { IpcPeerView } from "../../../../../lib/transfer/paths/ipc/ipc_data_path.ts";
import type { IpcViewFactory } from "../../../../../lib/transfer/paths/ipc/ipc_peer_setup.ts";
import type { IpcSignal, IpcSignalLine } from "../../../../../lib/transfer/paths/ipc/ipc_signals.ts";
import type { PendingTransfer } from "../../../../../lib/transfer/paths/direct_data_path.ts";

/** Block contents of one fake cache: block id -> a value standing for its bytes. */
export type FakeMemory = Map<number, string>;

/** A view of `dst` from a worker owning `src`: copies complete when the test says so (or at once with autoComplete). */
export class FakeView implements IpcPeerView {
  copies: string[] = [];
  disposed = 0;
  /** Throw from copyInto (the copy cannot be enqueued). */
  failEnqueue: string | undefined;
  /** Reject the wait (the copy failed on the device). */
  failWait: string | undefined;
  #pending: (() => void)[] = [];

  constructor(
    readonly numBlocks: number,
    readonly src: FakeMemory,
    readonly dst: FakeMemory,
    public autoComplete = true,
  ) {}

  copyInto(srcIds: Int32Array, dstIds: Int32Array): PendingTransfer {
    if (this.failEnqueue) throw new Error(this.failEnqueue);
    this.copies.push(`${Array.from(srcIds).join(",")}->${Array.from(dstIds).join(",")}`);
    const state = { done: false };
    const land = () => {
      if (state.done) return;
      srcIds.forEach((s, i) => this.dst.set(dstIds[i]!, this.src.get(s) ?? `empty ${s}`));
      state.done = true;
    };
    this.#pending.push(land);
    return {
      wait: async (timeoutMs) => {
        if (this.failWait) throw new Error(this.failWait);
        if (this.autoComplete) land();
        const end = Date.now() + timeoutMs;
        while (!state.done && Date.now() < end) await new Promise((r) => setTimeout(r, 1));
        return state.done;
      },
      dispose: () => {},
    };
  }

  /** Lands every copy enqueued so far. */
  completeAll(): void {
    for (const land of this.#pending.splice(0)) land();
  }

  dispose(): void {
    this.disposed++;
  }
}

/** Signal lines between ranks in one process; every signal is delivered on a later macrotask, and recorded. */
export class SignalNetwork {
  readonly log: string[] = [];
  readonly #handlers = new Map<number, (from: number, s: IpcSignal) => void>();

  line(rank: number): IpcSignalLine {
    return {
      send: async (peer, s) => {
        this.log.push(
          `${rank}->${peer} ${s.kind} ${s.planId}${
            s.kind === "done" && s.error !== undefined ? ` error: ${s.error}` : ""
          }`,
        );
        setTimeout(() => this.#handlers.get(peer)?.(rank, s), 0);
      },
      listen: (h) => void this.#handlers.set(rank, h),
    };
  }
}

/** Rank r's cache has 10 + r blocks and a handle of 64 bytes (r + 1); its maps record what they opened. */
export function fakeIpcFactory(
  rank: number,
  o: { exportFails?: string; openFails?: string; blockBytes?: number } = {},
) {
  const opened: { handleByte: number; numBlocks: number }[] = [];
  const views: FakeView[] = [];
  const factory: IpcViewFactory = {
    numBlocks: 10 + rank,
    blockBytes: o.blockBytes ?? 4096,
    exportHandle: () => {
      if (o.exportFails) throw new Error(o.exportFails);
      return new Uint8Array(64).fill(rank + 1);
    },
    openView: (handle, numBlocks) => {
      if (o.openFails) throw new Error(o.openFails);
      opened.push({ handleByte: handle[0]!, numBlocks });
      const v = new FakeView(numBlocks, new Map(), new Map());
      views.push(v);
      return v;
    },
  };
  return { factory, opened, views };
}
