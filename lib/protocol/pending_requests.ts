/**
 * Correlation of requests and replies: each outgoing request gets a fresh id, and the reply whose
 * `replyTo` carries it settles the waiting promise; a timer rejects it when no reply comes.
 * @module
 */
import { ConnectionClosedError, RemoteError, RequestTimeoutError } from "./protocol_errors.ts";
import type { Message } from "./messages.ts";

interface Pending {
  type: string;
  resolve: (m: Message) => void;
  reject: (e: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** The table of requests awaiting replies on one connection. */
export class PendingRequests {
  #nextId = 1;
  #pending = new Map<number, Pending>();

  /** Requests still waiting. */
  get size(): number {
    return this.#pending.size;
  }

  /** Registers a request of `type`; returns its id and the promise of its reply. */
  open(type: string, timeoutMs: number): { id: number; reply: Promise<Message> } {
    if (!(timeoutMs > 0)) throw new RangeError(`request timeout must be > 0 ms, got ${timeoutMs}`);
    const id = this.#nextId++;
    const reply = new Promise<Message>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new RequestTimeoutError(type, id, timeoutMs));
      }, timeoutMs);
      this.#pending.set(id, { type, resolve, reject, timer });
    });
    return { id, reply };
  }

  /** Settles the request `reply.replyTo` names; false when none waits (late or unknown reply). */
  settle(reply: Message): boolean {
    const id = reply.replyTo;
    if (id === undefined) return false;
    const p = this.#pending.get(id);
    if (!p) return false;
    this.#pending.delete(id);
    clearTimeout(p.timer);
    if (reply.type === "error") {
      p.reject(
        new RemoteError(`${p.type} #${id} failed on the peer: ${reply.message}`, reply.code, {
          messageType: reply.messageType,
          field: reply.field,
        }),
      );
    } else {
      p.resolve(reply);
    }
    return true;
  }

  /** Fails the request `id` (e.g. its frame was rejected by the peer). */
  fail(id: number, error: Error): boolean {
    const p = this.#pending.get(id);
    if (!p) return false;
    this.#pending.delete(id);
    clearTimeout(p.timer);
    p.reject(error);
    return true;
  }

  /** Rejects everything still waiting (the connection closed). */
  failAll(reason: string): void {
    for (const [id, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(new ConnectionClosedError(`${p.type} #${id} got no reply: ${reason}`));
    }
    this.#pending.clear();
  }
}
