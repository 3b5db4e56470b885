/**
 * The K/V data path of simulated workers: a payload takes the transfer profile's time for its bytes
 * on virtual time, one payload at a time per directed pair (a pair's copy engine or link carries one
 * plan's copy after another), and lands at the destination when that time has passed (a payload
 * stays known until its destination received it or cancelled it, whichever side asks first). No bytes move:
 * the simulated caches hold block metadata only, which the real TransferExecutor on each side
 * reserves, publishes and releases exactly as in a worker.
 * @module
 */
import type { VirtualClock } from "../../lib/core/virtual_clock.ts";
import type { KvDataPath, KvTransferJob } from "../../lib/transfer/paths/kv_data_path.ts";

/** What a payload costs on a pair. */
export interface PayloadCost {
  /** Milliseconds to move `bytes` from `src` to `dst`. */
  ms(src: number, dst: number, bytes: number): number;
  /** Name of the pair's path as workers report it (e.g. "ipc"). */
  pathName(src: number, dst: number): string;
}

interface Payload {
  arrival: Promise<void>;
  land: () => void;
  fail: (e: Error) => void;
  landed: boolean;
}

/** Every simulated worker's data path, sharing one view of the pairs' queues and payloads in flight. */
export class SimulatedFabric {
  /** Payloads moved and their bytes. */
  payloads = 0;
  bytes = 0;
  readonly #clock: VirtualClock;
  readonly #cost: PayloadCost;
  readonly #blockBytes: number;
  readonly #inFlight = new Map<string, Payload>();
  readonly #pairFreeAt = new Map<string, number>();

  constructor(clock: VirtualClock, cost: PayloadCost, blockBytes: number) {
    this.#clock = clock;
    this.#cost = cost;
    this.#blockBytes = blockBytes;
  }

  /** The data path worker `rank` uses. */
  pathOf(rank: number): KvDataPath {
    return {
      blockBytes: this.#blockBytes,
      pathOf: (peer) => this.#cost.pathName(rank, peer),
      send: (job) => this.#send(rank, job),
      receive: (job) =>
        this.#payload(job.planId).arrival.then(() => {
          this.#inFlight.delete(job.planId);
          return job.dstBlocks.length * this.#blockBytes;
        }),
      cancel: (planId, reason) => this.#cancel(planId, reason),
      close: () => Promise.resolve(),
    };
  }

  #payload(planId: string): Payload {
    let p = this.#inFlight.get(planId);
    if (!p) {
      let land!: () => void;
      let fail!: (e: Error) => void;
      const arrival = new Promise<void>((res, rej) => {
        land = res;
        fail = rej;
      });
      arrival.catch(() => {}); // a cancelled payload nobody waits for is not an error
      p = { arrival, land, fail, landed: false };
      this.#inFlight.set(planId, p);
    }
    return p;
  }

  #send(src: number, job: KvTransferJob): Promise<number> {
    const bytes = job.srcBlocks.length * this.#blockBytes;
    const key = `${src}>${job.peerRank}`;
    const now = this.#clock.now();
    const start = Math.max(now, this.#pairFreeAt.get(key) ?? 0);
    const end = start + this.#cost.ms(src, job.peerRank, bytes);
    this.#pairFreeAt.set(key, end);
    const p = this.#payload(job.planId);
    return new Promise<number>((resolve) => {
      this.#clock.setTimeout(() => {
        if (!p.landed) {
          p.landed = true;
          this.payloads++;
          this.bytes += bytes;
          p.land();
        }
        resolve(bytes);
      }, end - now);
    });
  }

  #cancel(planId: string, reason: string): void {
    const p = this.#inFlight.get(planId);
    if (!p) return;
    this.#inFlight.delete(planId);
    if (p.landed) return;
    p.landed = true;
    p.fail(new Error(`plan ${planId} cancelled: ${reason}`));
  }
}
