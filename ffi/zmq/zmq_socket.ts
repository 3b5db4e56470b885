/**
 * ZeroMQ contexts and sockets over libzmq (ffi/zmq/libzmq.ts), non-blocking only: a send never
 * waits (ZMQ_DONTWAIT) and a receive returns null when nothing is queued, so the event loop is
 * never held; callers poll on a timer. Both are native handles with idempotent dispose(); every
 * socket gets ZMQ_LINGER 0, so closing it drops unsent messages and the context terminates at once.
 *
 * @example
 * ```ts
 * using ctx = new ZmqContext();
 * using pub = ctx.socket("PUB");
 * pub.bind("tcp://*:5557");
 * pub.send([new TextEncoder().encode("topic"), new Uint8Array(8), payload]);
 * ```
 * @module
 */
import { copyFromAddress } from "../dlopen.ts";
import { NativeHandle } from "../native_handle.ts";
import { type Libzmq, loadLibzmq, ZMQ_ERRNO, ZMQ_FLAG, ZMQ_MSG_BYTES, ZMQ_OPT, ZMQ_TYPE } from "./libzmq.ts";
import { ZmqError } from "./zmq_errors.ts";

/** The socket types LMPool uses. */
export type ZmqSocketType = keyof typeof ZMQ_TYPE;

const encoder = new TextEncoder();

/** A NUL-terminated C string. */
function cString(s: string): Uint8Array {
  const bytes = encoder.encode(s);
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}

/** A ZeroMQ context: owns its sockets' I/O threads. Close its sockets before disposing it. */
export class ZmqContext extends NativeHandle {
  readonly zmq: Libzmq;
  readonly #sockets = new Set<ZmqSocket>();

  /** A new context on libzmq (loads it: throws LibzmqNotFoundError when it is missing). */
  constructor() {
    const zmq = loadLibzmq();
    const handle = BigInt(zmq.lib.symbols.zmq_ctx_new());
    if (handle === 0n) throw new ZmqError("zmq_ctx_new", Number(zmq.lib.symbols.zmq_errno()));
    super(handle, "ZmqContext");
    this.zmq = zmq;
  }

  /** A new socket of `type` in this context. */
  socket(type: ZmqSocketType): ZmqSocket {
    const s = new ZmqSocket(this, type, () => this.#sockets.delete(s));
    this.#sockets.add(s);
    return s;
  }

  /** Closes every socket still open, then terminates the context. */
  protected release(handle: bigint): void {
    for (const s of [...this.#sockets]) s.dispose();
    this.zmq.lib.symbols.zmq_ctx_term(handle);
  }
}

/** One ZeroMQ socket. Multipart messages are arrays of frames. */
export class ZmqSocket extends NativeHandle {
  readonly type: ZmqSocketType;
  readonly #zmq: Libzmq;
  readonly #onClose: () => void;
  /** One zmq_msg_t reused by every receive (8-byte aligned). */
  readonly #msg = new BigUint64Array(ZMQ_MSG_BYTES / 8);

  constructor(ctx: ZmqContext, type: ZmqSocketType, onClose: () => void) {
    const zmq = ctx.zmq;
    const handle = BigInt(zmq.lib.symbols.zmq_socket(ctx.handle, ZMQ_TYPE[type]));
    if (handle === 0n) throw new ZmqError("zmq_socket", Number(zmq.lib.symbols.zmq_errno()), type);
    super(handle, `ZmqSocket(${type})`);
    this.type = type;
    this.#zmq = zmq;
    this.#onClose = onClose;
    this.setInt(ZMQ_OPT.LINGER, 0);
  }

  /** Binds to `endpoint` (tcp://*:5557, ipc://path, inproc://name). */
  bind(endpoint: string): void {
    this.#check(this.#zmq.lib.symbols.zmq_bind(this.handle, cString(endpoint)), "zmq_bind", endpoint);
  }

  /** Connects to `endpoint`; libzmq keeps reconnecting in the background until it answers. */
  connect(endpoint: string): void {
    this.#check(this.#zmq.lib.symbols.zmq_connect(this.handle, cString(endpoint)), "zmq_connect", endpoint);
  }

  /** Sets an integer option (ZMQ_OPT). */
  setInt(option: number, value: number): void {
    const v = new Int32Array([value]);
    this.#check(this.#zmq.lib.symbols.zmq_setsockopt(this.handle, option, v, 4), "zmq_setsockopt", `option ${option}`);
  }

  /** Subscribes a SUB socket to messages whose first frame starts with `prefix` ("" for all). */
  subscribe(prefix: string | Uint8Array): void {
    const bytes = typeof prefix === "string" ? encoder.encode(prefix) : prefix;
    this.#check(
      this.#zmq.lib.symbols.zmq_setsockopt(this.handle, ZMQ_OPT.SUBSCRIBE, bytes, bytes.length),
      "zmq_setsockopt",
      "ZMQ_SUBSCRIBE",
    );
  }

  /** The endpoint the last bind resolved to (the port a `:0` or `:*` bind picked). */
  lastEndpoint(): string {
    const buf = new Uint8Array(512);
    const len = new BigUint64Array([BigInt(buf.length)]);
    this.#check(
      this.#zmq.lib.symbols.zmq_getsockopt(this.handle, ZMQ_OPT.LAST_ENDPOINT, buf, len),
      "zmq_getsockopt",
      "ZMQ_LAST_ENDPOINT",
    );
    const n = Number(len[0]);
    return new TextDecoder().decode(buf.subarray(0, n > 0 && buf[n - 1] === 0 ? n - 1 : n));
  }

  /**
   * Sends one multipart message without waiting. False when the socket cannot take it now (EAGAIN:
   * a DEALER with no connected peer yet); PUB and ROUTER drop instead, at their high-water mark or
   * for an unknown peer, as ZeroMQ defines. libzmq takes the remaining parts once it took the first.
   */
  send(frames: readonly Uint8Array[]): boolean {
    if (frames.length === 0) throw new RangeError("a ZeroMQ message needs at least one frame");
    const send = this.#zmq.lib.symbols.zmq_send;
    for (let i = 0; i < frames.length; i++) {
      const f = frames[i]!;
      const flags = ZMQ_FLAG.DONTWAIT | (i < frames.length - 1 ? ZMQ_FLAG.SNDMORE : 0);
      if (Number(send(this.handle, f.length > 0 ? f : null, f.length, flags)) >= 0) continue;
      const errno = this.#errno();
      if (errno === ZMQ_ERRNO.EAGAIN && i === 0) return false;
      throw new ZmqError("zmq_send", errno, `frame ${i} of ${frames.length} on ${this.type}`);
    }
    return true;
  }

  /** Receives one whole multipart message, or null when none is queued (never waits). */
  receive(): Uint8Array[] | null {
    const z = this.#zmq.lib.symbols;
    const frames: Uint8Array[] = [];
    for (;;) {
      this.#check(z.zmq_msg_init(this.#msg), "zmq_msg_init");
      // The first frame may be absent (EAGAIN); once it arrived, the rest of its message is queued.
      const n = Number(z.zmq_msg_recv(this.#msg, this.handle, frames.length === 0 ? ZMQ_FLAG.DONTWAIT : 0));
      if (n < 0) {
        const errno = this.#errno();
        z.zmq_msg_close(this.#msg);
        if (errno === ZMQ_ERRNO.EAGAIN && frames.length === 0) return null;
        throw new ZmqError("zmq_msg_recv", errno, `on ${this.type}`);
      }
      frames.push(copyFromAddress(BigInt(z.zmq_msg_data(this.#msg)), n));
      const more = Number(z.zmq_msg_more(this.#msg)) === 1;
      z.zmq_msg_close(this.#msg);
      if (!more) return frames;
    }
  }

  protected release(handle: bigint): void {
    this.#zmq.lib.symbols.zmq_close(handle);
    this.#onClose();
  }

  #errno(): number {
    return Number(this.#zmq.lib.symbols.zmq_errno());
  }

  #check(rc: number | bigint, call: string, what = ""): void {
    if (Number(rc) < 0) throw new ZmqError(call, this.#errno(), what);
  }
}
