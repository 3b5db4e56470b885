/**
 * One protocol connection over a byte stream: framed, schema-checked messages; request/reply
 * correlation with timeouts; heartbeats both ways with death detection. A malformed frame is
 * logged, answered with an `error` message naming its type and field, and skipped; the
 * connection keeps working.
 * @module
 */
import type { ByteStream } from "../runtime/unix_socket.ts";
import { DEFAULT_MAX_FRAME_BYTES, FrameDecoder } from "./frame_codec.ts";
import { DEFAULT_HEARTBEAT, HeartbeatMonitor, type HeartbeatOptions } from "./heartbeat_monitor.ts";
import { decodeMessage, encodeMessage } from "./message_codec.ts";
import type { Message, MessageOf, MessageType } from "./messages.ts";
import { PendingRequests } from "./pending_requests.ts";
import { ConnectionClosedError, type ProtocolError, RemoteError } from "./protocol_errors.ts";

/** Options of a {@link Connection}. */
export interface ConnectionOptions {
  /** Shown in log lines, e.g. "control<-worker1". */
  name: string;
  /** Heartbeat timing; `false` turns heartbeats off. */
  heartbeat?: Partial<HeartbeatOptions> | false;
  /** Default reply timeout of {@link Connection.request} (default 10 s). */
  requestTimeoutMs?: number;
  maxFrameBytes?: number;
  /** Log sink (default console.error). */
  log?: (line: string) => void;
}

/** A message without the correlation fields the connection fills in. */
export type Outgoing = Message extends infer M ? (M extends Message ? Omit<M, "id" | "replyTo"> : never) : never;

/** Why a connection ended. */
export interface CloseInfo {
  reason: string;
  /** True when the peer went silent past the heartbeat limit. */
  dead: boolean;
}

/** A framed, correlated, heart-beaten message channel. */
export class Connection {
  readonly name: string;
  readonly #stream: ByteStream;
  readonly #decoder: FrameDecoder;
  readonly #pending = new PendingRequests();
  readonly #heartbeat: HeartbeatMonitor | undefined;
  readonly #requestTimeoutMs: number;
  readonly #log: (line: string) => void;
  #onMessage: ((m: Message, c: Connection) => void) | undefined;
  #onClose: ((info: CloseInfo) => void) | undefined;
  #onProtocolError: ((e: ProtocolError) => void) | undefined;
  #closed = false;
  /** Counters for tests and stats. */
  readonly counters = { sent: 0, received: 0, rejected: 0, heartbeatsReceived: 0, lateReplies: 0 };

  constructor(stream: ByteStream, options: ConnectionOptions) {
    this.name = options.name;
    this.#stream = stream;
    this.#decoder = new FrameDecoder(options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES);
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.#log = options.log ?? ((line) => console.error(line));
    if (options.heartbeat !== false) {
      const hb = { ...DEFAULT_HEARTBEAT, ...options.heartbeat };
      this.#heartbeat = new HeartbeatMonitor(
        hb,
        (seq, sentAt) => this.#sendRaw({ type: "heartbeat", seq, sentAt }),
        (silentMs) =>
          this.#end(`peer silent for ${silentMs} ms (> ${hb.missLimit} heartbeats of ${hb.intervalMs} ms)`, true),
      );
    }
    stream.onData((chunk) => this.#receive(chunk));
    stream.onClose((err) => this.#end(err ? `stream error: ${err.message}` : "closed by peer", false));
    this.#heartbeat?.start();
  }

  /** True once closed (by either side, or declared dead). */
  get closed(): boolean {
    return this.#closed;
  }

  /** When the peer was last heard from (ms since the epoch); undefined without heartbeats. */
  get lastSeen(): number | undefined {
    return this.#heartbeat?.lastSeen;
  }

  /** Sets the handler of incoming messages that are not replies or heartbeats. */
  onMessage(handler: (message: Message, connection: Connection) => void): this {
    this.#onMessage = handler;
    return this;
  }

  /** Sets the callback run once when the connection ends (`dead` when heartbeats stopped). */
  onClose(handler: (info: CloseInfo) => void): this {
    this.#onClose = handler;
    return this;
  }

  /** Sets an observer of rejected frames (they are logged either way). */
  onProtocolError(handler: (error: ProtocolError) => void): this {
    this.#onProtocolError = handler;
    return this;
  }

  /**
   * Tells the peer that this side is about to block its event loop for about `expectedMs` (a step
   * computed on this thread), so the peer's heartbeat check allows for it. False when closed.
   */
  announceBusy(expectedMs: number): boolean {
    return this.#sendRaw({ type: "heartbeat", seq: 0, sentAt: Date.now(), busyMs: Math.max(0, expectedMs) });
  }

  /** Sends a one-way message; false when the connection is closed. */
  send(message: Outgoing): boolean {
    return this.#sendRaw(message as Message);
  }

  /** Sends `message` as the reply to `to` (which must carry an id). */
  reply(to: { id?: number; type: string }, message: Outgoing): boolean {
    if (to.id === undefined) throw new TypeError(`cannot reply to a ${to.type} message without an id`);
    return this.#sendRaw({ ...message, replyTo: to.id } as Message);
  }

  /** Replies to `to` with a typed error message. */
  replyError(to: { id?: number; type: string }, code: string, message: string, field?: string): boolean {
    const err = { type: "error" as const, code, message, messageType: to.type, field };
    return to.id === undefined ? this.#sendRaw(err) : this.#sendRaw({ ...err, replyTo: to.id });
  }

  /**
   * Sends a request and resolves with its reply. Rejects with RequestTimeoutError, RemoteError (an
   * `error` reply), or ConnectionClosedError; a reply of a type not in `expect` is a RemoteError.
   */
  async request<T extends MessageType>(
    message: Outgoing,
    options: { expect?: readonly T[]; timeoutMs?: number } = {},
  ): Promise<MessageOf<T>> {
    if (this.#closed) {
      throw new ConnectionClosedError(`${this.name}: cannot send ${message.type}, the connection is closed`);
    }
    const { id, reply } = this.#pending.open(message.type, options.timeoutMs ?? this.#requestTimeoutMs);
    if (!this.#sendRaw({ ...message, id } as Message)) {
      this.#pending.fail(id, new ConnectionClosedError(`${this.name}: ${message.type} #${id} could not be sent`));
    }
    const r = await reply;
    if (options.expect && !(options.expect as readonly string[]).includes(r.type)) {
      throw new RemoteError(
        `${message.type} #${id} got a ${r.type} reply, expected ${options.expect.join(" or ")}`,
        "unexpected_reply",
        { messageType: r.type },
      );
    }
    return r as MessageOf<T>;
  }

  /** Flushes and closes (idempotent); pending requests fail with ConnectionClosedError. */
  close(reason = "closed locally"): void {
    this.#end(reason, false);
  }

  #sendRaw(message: Message): boolean {
    if (this.#closed) return false;
    const frame = encodeMessage(message); // throws ProtocolError: a bad outgoing message is our bug
    this.counters.sent++;
    return this.#stream.write(frame);
  }

  #receive(chunk: Uint8Array): void {
    this.#heartbeat?.heard();
    for (const frame of this.#decoder.push(chunk)) {
      if (!frame.ok) {
        this.#reject(frame.error);
        continue;
      }
      const decoded = decodeMessage(frame.payload);
      if (!decoded.ok) {
        this.#reject(decoded.error);
        continue;
      }
      this.#dispatch(decoded.message);
      if (this.#closed) return;
    }
  }

  #dispatch(m: Message): void {
    this.counters.received++;
    if (m.type === "heartbeat") {
      this.counters.heartbeatsReceived++;
      if (m.busyMs !== undefined) this.#heartbeat?.heardBusy(m.busyMs);
      return;
    }
    if (m.replyTo !== undefined) {
      if (this.#pending.settle(m)) return;
      if (m.type !== "error") {
        this.counters.lateReplies++;
        this.#log(`[${this.name}] dropped ${m.type} reply to #${m.replyTo}: no request waits for it (timed out?)`);
        return;
      }
    }
    if (!this.#onMessage) {
      this.#log(`[${this.name}] no handler for ${m.type}; dropped`);
      return;
    }
    try {
      this.#onMessage(m, this);
    } catch (e) {
      // A handler bug must not take the connection (or the process) down.
      this.#log(`[${this.name}] handler for ${m.type} threw: ${(e as Error).stack ?? String(e)}`);
      if (m.id !== undefined && m.type !== "error") {
        this.replyError(m, "internal", `handler for ${m.type} failed: ${(e as Error).message}`);
      }
    }
  }

  #reject(error: ProtocolError): void {
    this.counters.rejected++;
    this.#log(`[${this.name}] rejected frame: ${error.message}`);
    this.#onProtocolError?.(error);
    // Tell the peer, so a request it sent fails now instead of timing out. Never answer an error
    // with an error (two broken peers would ping-pong forever).
    if (error.details.messageType === "error") return;
    const { messageType, field, id } = error.details;
    this.#sendRaw({
      type: "error",
      code: error.code,
      message: error.message,
      messageType,
      field,
      ...(id !== undefined ? { replyTo: id } : {}),
    });
  }

  #end(reason: string, dead: boolean): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#heartbeat?.stop();
    this.#pending.failAll(`${this.name}: ${reason}`);
    if (dead) this.#stream.destroy();
    else this.#stream.close();
    if (dead) this.#log(`[${this.name}] peer declared dead: ${reason}`);
    this.#onClose?.({ reason, dead });
  }
}
