// A test double of one end of an NCCL pair (lib/transfer/paths/nccl/nccl_data_path.ts PairLink): halves post in
// call order and complete when the test says so; abort fails the pending ones.
import type { PendingTransfer } from "../../../../../lib/transfer/paths/direct_data_path.ts";
import type { PairLink } from "../../../../../lib/transfer/paths/nccl/nccl_data_path.ts";

/** A pair whose halves complete when the test says so; abort fails the pending ones. */
export class FakePair implements PairLink {
  posted: string[] = [];
  aborted = false;
  disposed = false;
  #pending: { done: boolean; failed: boolean }[] = [];
  #half(kind: string, ids: Int32Array): PendingTransfer {
    this.posted.push(`${kind}:${Array.from(ids).join(",")}`);
    const state = { done: false, failed: false };
    this.#pending.push(state);
    return {
      wait: async (timeoutMs: number) => {
        const end = Date.now() + timeoutMs;
        while (!state.done && !state.failed && Date.now() < end) await new Promise((r) => setTimeout(r, 1));
        if (state.failed) throw new Error("the NCCL pair of this transfer was aborted");
        return state.done;
      },
      dispose: () => {},
    };
  }
  send(_kv: unknown, ids: Int32Array): PendingTransfer {
    return this.#half("send", ids);
  }
  recv(_kv: unknown, ids: Int32Array): PendingTransfer {
    return this.#half("recv", ids);
  }
  completeAll(): void {
    for (const p of this.#pending) p.done = true;
  }
  abort(): void {
    this.aborted = true;
    for (const p of this.#pending) if (!p.done) p.failed = true;
  }
  dispose(): void {
    this.disposed = true;
  }
}
