/**
 * The host path: a plan's blocks gathered into host memory, sent over the workers' own Unix
 * sockets ({@link KvPeerChannel}) and scattered on the other side. The CPU backend's only path; on
 * CUDA the fallback for peers without a direct path and after one breaks.
 * @module
 */
import { type KvDataPath, type KvTransferJob, type PackedKvStore, TransferPayloadError } from "../kv_data_path.ts";
import type { KvPeerChannel } from "./kv_peer_channel.ts";

/** KvDataPath through host memory and a {@link KvPeerChannel}. */
export class HostCopyDataPath implements KvDataPath {
  readonly #kv: PackedKvStore;
  readonly #channel: KvPeerChannel;

  constructor(kv: PackedKvStore, channel: KvPeerChannel) {
    this.#kv = kv;
    this.#channel = channel;
  }

  get blockBytes(): number {
    return this.#kv.blockBytes;
  }

  async send(job: KvTransferJob): Promise<number> {
    // Gathered synchronously: the source blocks are pinned, so their bytes are final.
    const packed = this.#kv.gather(job.srcBlocks);
    await this.#channel.send(job.planId, job.peerRank, packed);
    return packed.byteLength;
  }

  async receive(job: KvTransferJob): Promise<number> {
    const packed = await this.#channel.receive(job.planId, job.peerRank);
    const want = job.dstBlocks.length * this.#kv.blockBytes;
    if (packed.byteLength !== want) {
      throw new TransferPayloadError(
        `plan ${job.planId}: payload from rank ${job.peerRank} has ${packed.byteLength} bytes, expected ${want} (${job.dstBlocks.length} blocks)`,
      );
    }
    this.#kv.scatter(job.dstBlocks, packed);
    return packed.byteLength;
  }

  cancel(planId: string, reason: string): void {
    this.#channel.cancel(planId, reason);
  }

  close(): Promise<void> {
    return this.#channel.close();
  }
}
