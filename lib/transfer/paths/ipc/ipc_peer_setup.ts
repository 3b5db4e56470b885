/**
 * A worker's start-up of its CUDA IPC pairs, one per direct partner (on another device over NVLink,
 * or on its own device for the device-local path), all partners at once (nothing here blocks the
 * event loop for long). Per pair, through the control plane's rendezvous
 * (lib/transfer/paths/ipc/ipc_messages.ts):
 * 1. stage "handle": offer this worker's exported KV cache handle (or why there is none), get the
 *    partner's;
 * 2. map the partner's cache (lp_kv_ipc_open enables peer access to its device and fails when the
 *    two devices cannot access each other; on one device there is nothing to enable), after
 *    checking both caches have the same block shape;
 * 3. stage "opened": offer whether that worked, get the partner's result. The pair is up only when
 *    both sides mapped the other's cache, so both sides agree on it; otherwise the mapping is
 *    closed again.
 * A pair that does not come up is logged on one line naming it and the cause, and left to the next
 * path (NCCL or host). Never throws; bounded by the rendezvous timeout.
 * @module
 */
import type { MessageOf } from "../../../protocol/messages.ts";
import { meetPartner, type PairSetupOptions, safely } from "../control_rendezvous.ts";
import type { IpcPeerView } from "./ipc_data_path.ts";
import { pairName } from "../direct_data_path.ts";
// The CUDA IPC messages register themselves with the codec when this module loads.
import "./ipc_messages.ts";

/** Exports this worker's cache and maps a peer's (ffi/kv_transfer.ts KvTransferEngine behind it; a fake in tests). */
export interface IpcViewFactory {
  /** Blocks of this worker's cache. */
  readonly numBlocks: number;
  /** Bytes of one block of this worker's cache (all layers, K and V). */
  readonly blockBytes: number;
  /** The 64-byte handle of this worker's cache; throws when CUDA IPC is not available. */
  exportHandle(): Uint8Array;
  /** Maps a peer's exported cache of `numBlocks` blocks; throws when it cannot. */
  openView(handle: Uint8Array, numBlocks: number): IpcPeerView;
}

/** Options of {@link setUpIpcPeers}: `peers` are direct partners; `rendezvousTimeoutMs` bounds one pair's start-up. */
export interface IpcPeerSetupOptions extends PairSetupOptions {
  factory: IpcViewFactory;
  /** What the pairs are called in log lines. Default "CUDA IPC". */
  label?: string;
  /** Where plans with a partner go when its pair does not come up, for the log line (e.g. "try NCCL next"). */
  fallback: string;
}

/** The partners whose caches are mapped, and why the others are not. */
export interface IpcPeerSetup {
  views: Map<number, IpcPeerView>;
  failed: Map<number, string>;
}

/** Sets up every pair (see the module doc). Never throws: failures land in `failed`. */
export async function setUpIpcPeers(o: IpcPeerSetupOptions): Promise<IpcPeerSetup> {
  const log = o.log ?? ((l: string) => console.error(l));
  const label = o.label ?? "CUDA IPC";
  const out: IpcPeerSetup = { views: new Map(), failed: new Map() };
  const exported = safely(() => o.factory.exportHandle());
  const local = exported.ok ? undefined : `cannot export rank ${o.rank}'s KV cache: ${exported.error}`;
  await Promise.all(
    [...new Set(o.peers)].map(async (peer) => {
      const r = await setUpPair(o, peer, exported.ok ? exported.value : undefined, local);
      if ("view" in r) {
        out.views.set(peer, r.view);
        log(
          `[worker ${o.rank}] ${label} pair ${
            pairName(o.rank, peer)
          } up: rank ${peer}'s cache (${r.view.numBlocks} blocks) mapped`,
        );
      } else {
        out.failed.set(peer, r.error);
        log(
          `[worker ${o.rank}] ${label} pair ${
            pairName(o.rank, peer)
          } is not available, plans with rank ${peer} ${o.fallback}: ${r.error}`,
        );
      }
    }),
  );
  return out;
}

async function setUpPair(
  o: IpcPeerSetupOptions,
  peer: number,
  handle: Uint8Array | undefined,
  local: string | undefined,
): Promise<{ view: IpcPeerView } | { error: string }> {
  const deadline = Date.now() + o.rendezvousTimeoutMs;
  const base = { type: "ipc_offer" as const, rank: o.rank, epoch: o.epoch, peerRank: peer };
  let theirs: MessageOf<"ipc_answer">;
  try {
    const mine = handle
      ? { handle, numBlocks: o.factory.numBlocks, blockBytes: o.factory.blockBytes }
      : { error: local ?? "no handle" };
    theirs = await meetPartner(o, peer, { ...base, stage: "handle", ...mine }, "ipc_answer", deadline);
  } catch (e) {
    return { error: `rendezvous through the control plane failed: ${(e as Error).message}` };
  }
  // Both sides reached stage 1, so both go through stage 2, whatever happened: that is how each
  // learns whether the other side mapped its cache.
  let problem = local ?? theirs.error;
  if (
    problem === undefined &&
    (theirs.handle === undefined || theirs.numBlocks === undefined || theirs.blockBytes === undefined)
  ) problem = `rank ${peer} offered no handle`;
  if (problem === undefined && theirs.blockBytes !== o.factory.blockBytes) {
    problem = `rank ${peer}'s blocks have ${theirs.blockBytes} bytes, rank ${o.rank}'s ${o.factory.blockBytes}`;
  }
  let view: IpcPeerView | undefined;
  if (problem === undefined) {
    const opened = safely(() => o.factory.openView(theirs.handle!, theirs.numBlocks!));
    if (opened.ok) view = opened.value;
    else problem = `cannot map rank ${peer}'s cache (${theirs.numBlocks} blocks): ${opened.error}`;
  }
  let partner: MessageOf<"ipc_answer">;
  try {
    partner = await meetPartner(
      o,
      peer,
      { ...base, stage: "opened", ...(problem !== undefined ? { error: problem } : {}) },
      "ipc_answer",
      deadline,
    );
  } catch (e) {
    problem ??= `rendezvous through the control plane failed after mapping: ${(e as Error).message}`;
  }
  problem ??= partner!.error;
  if (problem === undefined) return { view: view! };
  if (view) {
    const closed = safely(() => view.dispose());
    if (!closed.ok) problem += `; closing the mapping failed: ${closed.error}`;
  }
  return { error: problem };
}
