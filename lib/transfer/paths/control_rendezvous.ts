/**
 * A worker's side of a start-up rendezvous at the control plane (NCCL unique ids, CUDA IPC
 * handles): one offer as a request on a short-lived connection of its own, answered once the
 * partner's offer arrived. Short-lived, so the worker's heart-beaten connections are not held up
 * by a partner still loading its model.
 * @module
 */
import { Connection, type Outgoing } from "../../protocol/connection.ts";
import type { HeartbeatOptions } from "../../protocol/heartbeat_monitor.ts";
import type { MessageOf, MessageType } from "../../protocol/messages.ts";
import { ConnectionClosedError, RequestTimeoutError } from "../../protocol/protocol_errors.ts";
import { connectUnix } from "../../runtime/unix_socket.ts";
import { pairName } from "./direct_data_path.ts";

/** Where and how long a worker meets its partner. */
export interface RendezvousClientOptions {
  rank: number;
  controlSocketPath: string;
  /** Bound on waiting for the partner to reach the rendezvous (it may still be loading its model). */
  rendezvousTimeoutMs: number;
  heartbeat?: Partial<HeartbeatOptions> | false;
  log?: (line: string) => void;
}

/** What every direct pair set-up (CUDA IPC, NCCL) is told: this worker, its partners, where to meet them. */
export interface PairSetupOptions extends RendezvousClientOptions {
  epoch: number;
  /** Partners to pair with (direct partners). */
  peers: readonly number[];
}

/** The partner did not reach the rendezvous in time. */
class RendezvousTimeoutError extends Error {
  override readonly name = "RendezvousTimeoutError";
}

/**
 * Sends `offer` about the pair with `peer` and waits for the control plane's answer of type
 * `expect`, until `deadline` (ms since the epoch; default now + rendezvousTimeoutMs). A lost
 * connection (control plane restarting) is retried with the same offer until then.
 */
export async function meetPartner<T extends MessageType>(
  o: RendezvousClientOptions,
  peer: number,
  offer: Outgoing,
  expect: T,
  deadline = Date.now() + o.rendezvousTimeoutMs,
): Promise<MessageOf<T>> {
  const late = () =>
    new RendezvousTimeoutError(`rank ${peer} did not reach the rendezvous within ${o.rendezvousTimeoutMs} ms`);
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw late();
    const stream = await connectUnix(o.controlSocketPath, { timeoutMs: left });
    const conn = new Connection(stream, {
      name: `worker${o.rank}->control (${offer.type} ${pairName(o.rank, peer)})`,
      heartbeat: o.heartbeat,
      log: o.log,
    });
    conn.onMessage(() => {});
    try {
      return await conn.request(offer, { expect: [expect], timeoutMs: left });
    } catch (e) {
      if (e instanceof RequestTimeoutError) throw late();
      if (!(e instanceof ConnectionClosedError)) throw e;
    } finally {
      conn.close("rendezvous over");
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Runs `f`, turning a throw into its message. */
export function safely<T>(f: () => T): { ok: true; value: T } | { ok: false; error: string } {
  try {
    return { ok: true, value: f() };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  }
}
