/**
 * {@link KvDataPath} over CUDA IPC: at start-up each worker maps the KV cache of each direct
 * partner, over NVLink on another device or on its own device (the device-local path;
 * lib/transfer/paths/ipc/ipc_peer_setup.ts); a plan's source then copies its blocks straight into the
 * destination's reserved blocks through that mapping with the copy engine (ffi/kv_transfer.ts
 * peerCopy, copy_engine_direct: no packing, no staging, no kernels), waits for the copy with a
 * timeout and tells the destination. The destination runs no device work at all.
 *
 * The copy is one-sided, so the two workers order it with two signals (lib/transfer/paths/ipc/ipc_signals.ts):
 * 1. the destination's receive() (started at its prepare: receivesAtPrepare) sends `ready`,
 *    naming its reserved blocks, and waits; the source copies only after `ready`, into the blocks
 *    it names, so a destination that aborted before its receive started (its blocks may be
 *    released and reused at once) is never written, and a source need not know the blocks before
 *    (the control plane pipelines execute behind prepare);
 * 2. the source sends `done` once the copy completed, or with an error when nothing was (or will
 *    be) written; receive() resolves only on a successful `done`. The destination acks execute
 *    after that, and the control plane publishes only after both acks, so the destination never
 *    publishes (nor does a cancelled receive let go of its blocks) before the bytes landed.
 * Cancelling a waiting receive does not end it early: it still waits (bounded by the timeout) for
 * the source's `done`, because the source may be copying; a source that cancels, or that gets a
 * `ready` for a plan it will not copy, answers `done` with an error at once.
 *
 * A copy that fails or times out breaks the pair: onPeerBroken moves the peer to the host path
 * (PerPeerDataPath), and the control plane tells the partner. After a timeout the source keeps
 * watching the copy for half the timeout more and reports only then, so the destination (which
 * waits twice the timeout) keeps its blocks reserved while a late copy may still land. Mappings
 * are closed at close().
 * @module
 */
import type { KvTransferJob } from "../kv_data_path.ts";
import { TransferCancelledError } from "../host/kv_peer_channel.ts";
import type { IpcSignal, IpcSignalLine } from "./ipc_signals.ts";
import { type DirectDataPath, type PendingTransfer, TransferTimeoutError } from "../direct_data_path.ts";

/** This worker's mapping of one peer's KV cache (ffi/kv_transfer.ts RemoteKvCache behind it; a fake in tests). */
export interface IpcPeerView {
  /** Blocks of the peer's cache. */
  readonly numBlocks: number;
  /** Enqueues the copy of this worker's blocks `srcIds` into the peer's blocks `dstIds`. */
  copyInto(srcIds: Int32Array, dstIds: Int32Array): PendingTransfer;
  /** Unmaps the peer's cache (every copy into it must be complete). */
  dispose(): void;
}

/** Options of an {@link IpcDataPath}. */
export interface IpcDataPathOptions {
  rank: number;
  /** Bytes of one block (both caches have the model's shape). */
  blockBytes: number;
  /** Peer rank -> this worker's mapping of its cache (taken over: close() disposes them). */
  views: Map<number, IpcPeerView>;
  signals: IpcSignalLine;
  /** Bound on a copy and on the source's wait for `ready`; the destination waits twice as long for `done`. */
  timeoutMs: number;
  /** Called once when a peer's pair breaks (copy failed or timed out, signal never came). */
  onPeerBroken?: (peerRank: number, reason: string) => void;
  log?: (line: string) => void;
}

/** Plan ids remembered as cancelled, and `ready`s waiting for their send(), at most. */
const REMEMBERED = 1024;

interface ReadyWaiter {
  from: number;
  resolve: (dstBlocks: Int32Array) => void;
  reject: (e: Error) => void;
}

/** KvDataPath over CUDA IPC mappings of the partners' caches. */
export class IpcDataPath implements DirectDataPath {
  readonly #o: IpcDataPathOptions;
  readonly #views: Map<number, IpcPeerView>;
  readonly #broken = new Map<number, string>();
  readonly #cancelled = new Map<string, string>();
  /** `ready`s that came before their send() (plan id -> destination rank and its blocks). */
  readonly #readyArrived = new Map<string, { from: number; dstBlocks: Int32Array }>();
  readonly #readyWaiters = new Map<string, ReadyWaiter>();
  readonly #doneWaiters = new Map<string, { from: number; settle: (error: string | undefined) => void }>();
  #closed = false;

  constructor(o: IpcDataPathOptions) {
    if (!(o.timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${o.timeoutMs}`);
    this.#o = o;
    this.#views = new Map(o.views);
    o.signals.listen((from, s) => this.#onSignal(from, s));
  }

  get blockBytes(): number {
    return this.#o.blockBytes;
  }

  /** The source copies only after `ready` and within its own send(): the destination may say it at prepare. */
  receivesAtPrepare(peer: number): boolean {
    return this.#views.has(peer) && !this.#broken.has(peer);
  }

  /**
   * Source: waits for the destination's `ready`, copies into the blocks it names (which must match
   * the job's when the job names them), waits, reports `done`.
   */
  async send(job: KvTransferJob): Promise<number> {
    const view = this.#usable(job, "send to");
    const dstBlocks = await this.#awaitReady(job);
    const cancelled = this.#cancelled.get(job.planId);
    const mismatch = dstBlocks.length !== job.srcBlocks.length ||
      (job.dstBlocks.length > 0 && !sameIds(dstBlocks, job.dstBlocks));
    if (cancelled !== undefined || mismatch) {
      const why = cancelled !== undefined
        ? `the plan was cancelled (${cancelled})`
        : `the destination named blocks ${dstBlocks.join(",")} for source blocks ${job.srcBlocks.join(",")}${
          job.dstBlocks.length > 0 ? ` (the plan says ${job.dstBlocks.join(",")})` : ""
        }`;
      this.#signal(job.peerRank, { kind: "done", planId: job.planId, error: `not copied: ${why}` });
      if (cancelled !== undefined) throw new TransferCancelledError(`plan ${job.planId} was cancelled: ${cancelled}`);
      throw new RangeError(`plan ${job.planId}: ${why}`);
    }
    let pending: PendingTransfer;
    try {
      pending = view.copyInto(job.srcBlocks, dstBlocks);
    } catch (e) {
      // Nothing was enqueued: nothing will be written.
      const reason = `plan ${job.planId}: the copy into rank ${job.peerRank}'s cache could not start: ${
        (e as Error).message
      }`;
      this.#signal(job.peerRank, { kind: "done", planId: job.planId, error: reason });
      this.#breakPeer(job.peerRank, reason);
      throw new Error(reason, { cause: e });
    }
    let complete: boolean;
    try {
      complete = await pending.wait(this.#o.timeoutMs);
    } catch (e) {
      pending.dispose();
      const reason = `plan ${job.planId}: the copy into rank ${job.peerRank}'s cache failed: ${(e as Error).message}`;
      this.#signal(job.peerRank, { kind: "done", planId: job.planId, error: reason });
      this.#breakPeer(job.peerRank, reason);
      throw new Error(reason, { cause: e });
    }
    if (!complete) {
      // The pair is not trusted again. The destination hears only once the copy is over (or given
      // up on a while later), so its blocks stay reserved while the copy may still write them.
      const reason =
        `plan ${job.planId}: the copy into rank ${job.peerRank}'s cache not complete after ${this.#o.timeoutMs} ms`;
      this.#breakPeer(job.peerRank, reason);
      void pending
        .wait(this.#o.timeoutMs / 2)
        .then(
          (landed) => (landed ? `${reason} (it completed later)` : `${reason} (nor ${this.#o.timeoutMs / 2} ms later)`),
          (e: Error) => `${reason}; then it failed: ${e.message}`,
        )
        .then((error) => {
          pending.dispose();
          this.#signal(job.peerRank, { kind: "done", planId: job.planId, error });
        });
      throw new TransferTimeoutError(reason);
    }
    // The destination hears first: releasing the job's events is not on the plan's path.
    try {
      await this.#o.signals.send(job.peerRank, { kind: "done", planId: job.planId });
    } finally {
      pending.dispose();
    }
    return job.srcBlocks.length * this.#o.blockBytes;
  }

  /** Destination: tells the source it may copy, and resolves once it reports the copy complete. */
  async receive(job: KvTransferJob): Promise<number> {
    this.#usable(job, "receive from");
    if (this.#doneWaiters.has(job.planId)) throw new RangeError(`plan ${job.planId} is already being received`);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const outcome = new Promise<string | undefined>((resolve) => {
      const settle = (error: string | undefined) => {
        clearTimeout(timer);
        this.#doneWaiters.delete(job.planId);
        resolve(error);
      };
      this.#doneWaiters.set(job.planId, { from: job.peerRank, settle });
      timer = setTimeout(() => settle(TIMED_OUT), this.#reportWaitMs);
    });
    try {
      await this.#o.signals.send(job.peerRank, { kind: "ready", planId: job.planId, dstBlocks: job.dstBlocks });
    } catch (e) {
      // The source never heard of this receive, so it writes nothing.
      this.#doneWaiters.get(job.planId)?.settle(undefined);
      throw e;
    }
    const error = await outcome;
    if (error === TIMED_OUT) {
      const reason = `plan ${job.planId}: rank ${job.peerRank} did not report its copy within ${this.#reportWaitMs} ms`;
      this.#breakPeer(job.peerRank, reason);
      throw new TransferTimeoutError(reason);
    }
    const cancelled = this.#cancelled.get(job.planId);
    if (cancelled !== undefined) throw new TransferCancelledError(`plan ${job.planId} was cancelled: ${cancelled}`);
    if (error !== undefined) throw new Error(`plan ${job.planId}: rank ${job.peerRank} did not copy: ${error}`);
    return job.dstBlocks.length * this.#o.blockBytes;
  }

  cancel(planId: string, reason: string): void {
    this.#cancelled.set(planId, reason);
    if (this.#cancelled.size > REMEMBERED) this.#cancelled.delete(this.#cancelled.keys().next().value!);
    this.#readyWaiters.get(planId)?.reject(new TransferCancelledError(`plan ${planId} was cancelled: ${reason}`));
    const from = this.#readyArrived.get(planId);
    if (from !== undefined) {
      this.#readyArrived.delete(planId);
      this.#signal(from.from, { kind: "done", planId, error: `not copied: the plan was cancelled (${reason})` });
    }
  }

  /** Stops using the pair with `peer` (its partner dropped it); its mapping is closed at close(). */
  dropPeer(peer: number, reason: string): void {
    if (!this.#views.has(peer) || this.#broken.has(peer)) return;
    this.#broken.set(peer, `its CUDA IPC pair was dropped (${reason})`);
    for (const w of this.#readyWaiters.values()) {
      if (w.from === peer) w.reject(new Error(`the CUDA IPC pair with rank ${peer} was dropped: ${reason}`));
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const w of [...this.#readyWaiters.values()]) {
      w.reject(new TransferCancelledError(`the CUDA IPC data path of rank ${this.#o.rank} closed`));
    }
    for (const w of [...this.#doneWaiters.values()]) w.settle(`the CUDA IPC data path of rank ${this.#o.rank} closed`);
    for (const [peer, view] of this.#views) {
      this.#views.delete(peer);
      try {
        view.dispose();
      } catch (e) {
        this.#log(
          `[worker ${this.#o.rank}] closing the CUDA IPC mapping of rank ${peer}'s cache failed: ${
            (e as Error).message
          }`,
        );
      }
    }
  }

  /** The view of the job's peer; throws when the plan cannot use this path. */
  #usable(job: KvTransferJob, what: string): IpcPeerView {
    // A source may not know the destination's blocks yet (empty): its `ready` names them.
    if (job.srcBlocks.length !== job.dstBlocks.length && (what !== "send to" || job.dstBlocks.length > 0)) {
      throw new RangeError(
        `plan ${job.planId}: ${job.srcBlocks.length} source blocks but ${job.dstBlocks.length} destination blocks`,
      );
    }
    if (this.#closed) throw new TransferCancelledError(`the CUDA IPC data path of rank ${this.#o.rank} is closed`);
    const cancelled = this.#cancelled.get(job.planId);
    if (cancelled !== undefined) throw new TransferCancelledError(`plan ${job.planId} was cancelled: ${cancelled}`);
    const view = this.#views.get(job.peerRank);
    const broken = this.#broken.get(job.peerRank);
    if (!view || broken !== undefined) {
      throw new Error(
        `plan ${job.planId}: cannot ${what} rank ${job.peerRank} over CUDA IPC: ${broken ?? "no mapping of its cache"}`,
      );
    }
    return view;
  }

  /** The destination's bound on waiting for `done`: the source's copy bound, and as much again for it to start and report. */
  get #reportWaitMs(): number {
    return 2 * this.#o.timeoutMs;
  }

  /** Resolves with the destination's blocks when its `ready` for the job is (or was already) in. */
  #awaitReady(job: KvTransferJob): Promise<Int32Array> {
    const arrived = this.#readyArrived.get(job.planId);
    if (arrived !== undefined) {
      this.#readyArrived.delete(job.planId);
      if (arrived.from === job.peerRank) return Promise.resolve(arrived.dstBlocks);
      return Promise.reject(
        new RangeError(
          `plan ${job.planId}: ready came from rank ${arrived.from}, the destination is rank ${job.peerRank}`,
        ),
      );
    }
    if (this.#readyWaiters.has(job.planId)) {
      return Promise.reject(new RangeError(`plan ${job.planId} is already being sent`));
    }
    return new Promise<Int32Array>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.#readyWaiters.delete(job.planId);
      };
      const timer = setTimeout(() => {
        done();
        // A ready arriving later must not wait for a copy that will not come.
        this.cancel(job.planId, "the source stopped waiting for it");
        reject(
          new TransferTimeoutError(
            `plan ${job.planId}: rank ${job.peerRank} did not ask for the copy within ${this.#o.timeoutMs} ms`,
          ),
        );
      }, this.#o.timeoutMs);
      this.#readyWaiters.set(job.planId, {
        from: job.peerRank,
        resolve: (ids) => (done(), resolve(ids)),
        reject: (e) => (done(), reject(e)),
      });
    });
  }

  #onSignal(from: number, s: IpcSignal): void {
    if (s.kind === "done") {
      const w = this.#doneWaiters.get(s.planId);
      // A report nobody waits for (the receive timed out or closed) changes nothing.
      if (!w) return;
      if (w.from !== from) {
        return this.#log(
          `[worker ${this.#o.rank}] dropped a done signal of plan ${s.planId} from rank ${from}; the source is rank ${w.from}`,
        );
      }
      return w.settle(s.error);
    }
    const cancelled = this.#cancelled.get(s.planId);
    const broken = this.#views.has(from)
      ? this.#broken.get(from)
      : `rank ${this.#o.rank} has no CUDA IPC mapping of rank ${from}'s cache`;
    const refusal = cancelled !== undefined
      ? `the plan was cancelled (${cancelled})`
      : broken ?? (this.#closed ? "the source's data path is closed" : undefined);
    if (refusal !== undefined) {
      return this.#signal(from, { kind: "done", planId: s.planId, error: `not copied: ${refusal}` });
    }
    const w = this.#readyWaiters.get(s.planId);
    if (w) {
      if (w.from === from) w.resolve(s.dstBlocks);
      else {w.reject(
          new RangeError(`plan ${s.planId}: ready came from rank ${from}, the destination is rank ${w.from}`),
        );}
      return;
    }
    this.#readyArrived.set(s.planId, { from, dstBlocks: s.dstBlocks });
    if (this.#readyArrived.size > REMEMBERED) this.#readyArrived.delete(this.#readyArrived.keys().next().value!);
  }

  /** Sends a signal whose loss only costs the receiver a timeout. */
  #signal(peer: number, s: IpcSignal): void {
    this.#o.signals.send(peer, s).catch((e: Error) =>
      this.#log(`[worker ${this.#o.rank}] could not send ${s.kind} of plan ${s.planId} to rank ${peer}: ${e.message}`)
    );
  }

  #breakPeer(peer: number, reason: string): void {
    if (!this.#views.has(peer) || this.#broken.has(peer)) return;
    this.dropPeer(peer, reason);
    this.#o.onPeerBroken?.(peer, reason);
  }

  #log(line: string): void {
    (this.#o.log ?? ((l: string) => console.error(l)))(line);
  }
}

/** A receive's outcome when no `done` came in time (never a real error text). */
const TIMED_OUT = "\u0000timed out";

function sameIds(a: Int32Array, b: Int32Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}
