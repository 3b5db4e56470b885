/**
 * libzmq (ZeroMQ's C library, Debian's `libzmq5`) through FFI: the symbol table of the few calls
 * LMPool makes, the option and flag numbers of zmq.h, and the loader. It is opened through
 * ffi/dlopen.ts like LMPool's own library, so it runs under Bun and Deno alike. The `zeromq` npm
 * addon is not used: under Bun 1.4.5 it panics on its first socket (`unsupported uv function:
 * uv_poll_init_socket`), while libzmq itself needs nothing of the runtime's event loop when every
 * call is non-blocking (ZMQ_DONTWAIT) and the caller polls on a timer.
 *
 * Pointers (the context, sockets, message data) travel as 64-bit integers, as the handles of
 * lmpool.h do (same registers on x86-64 and aarch64); `size_t` likewise.
 * @module
 */
import { readSetting } from "../../lib/runtime/env.ts";
import { type OpenedLibrary, openLibrary } from "../dlopen.ts";
import type { NativeSignature } from "../symbols.ts";
import { LibzmqNotFoundError } from "./zmq_errors.ts";

/** The libzmq calls LMPool makes (zmq.h, ABI of libzmq.so.5). */
export const ZMQ_SYMBOLS = {
  zmq_version: { args: ["buf", "buf", "buf"], returns: "void" },
  zmq_errno: { args: [], returns: "i32" },
  zmq_ctx_new: { args: [], returns: "u64" },
  zmq_ctx_term: { args: ["u64"], returns: "i32" },
  zmq_socket: { args: ["u64", "i32"], returns: "u64" },
  zmq_close: { args: ["u64"], returns: "i32" },
  zmq_bind: { args: ["u64", "buf"], returns: "i32" },
  zmq_connect: { args: ["u64", "buf"], returns: "i32" },
  zmq_setsockopt: { args: ["u64", "i32", "buf", "u64"], returns: "i32" },
  zmq_getsockopt: { args: ["u64", "i32", "buf", "buf"], returns: "i32" },
  zmq_send: { args: ["u64", "buf", "u64", "i32"], returns: "i32" },
  zmq_msg_init: { args: ["buf"], returns: "i32" },
  zmq_msg_recv: { args: ["buf", "u64", "i32"], returns: "i32" },
  zmq_msg_data: { args: ["buf"], returns: "u64" },
  zmq_msg_more: { args: ["buf"], returns: "i32" },
  zmq_msg_close: { args: ["buf"], returns: "i32" },
} as const satisfies Record<string, NativeSignature>;

/** Names of the libzmq calls. */
export type ZmqSymbol = keyof typeof ZMQ_SYMBOLS;

/** Socket types of zmq.h. */
export const ZMQ_TYPE = { PUB: 1, SUB: 2, REQ: 3, DEALER: 5, ROUTER: 6 } as const;

/** The socket options LMPool sets or reads (zmq.h). */
export const ZMQ_OPT = {
  SUBSCRIBE: 6,
  RCVMORE: 13,
  LINGER: 17,
  SNDHWM: 23,
  RCVHWM: 24,
  LAST_ENDPOINT: 32,
} as const;

/** Send and receive flags (zmq.h). */
export const ZMQ_FLAG = { DONTWAIT: 1, SNDMORE: 2 } as const;

/** errno values libzmq reports that callers act on (Linux numbering; ETERM is libzmq's own). */
export const ZMQ_ERRNO = { EAGAIN: 11, EINTR: 4, ETERM: 156384765 } as const;

/** Bytes of a zmq_msg_t (an opaque, 8-byte aligned struct of 64 bytes in libzmq 4). */
export const ZMQ_MSG_BYTES = 64;

/** The library file the system loader looks for when LMPOOL_LIBZMQ names none. */
export const LIBZMQ_SONAME = "libzmq.so.5";

/** The opened library. */
export interface Libzmq {
  readonly path: string;
  readonly lib: OpenedLibrary<ZmqSymbol>;
  /** major.minor.patch of the loaded libzmq. */
  readonly version: string;
}

let opened: Libzmq | undefined;

/**
 * Opens libzmq once per process (LMPOOL_LIBZMQ, else `libzmq.so.5` through the system loader's
 * search); throws LibzmqNotFoundError saying how to install it.
 */
export function loadLibzmq(): Libzmq {
  if (opened) return opened;
  const path = readSetting("LMPOOL_LIBZMQ") ?? LIBZMQ_SONAME;
  let lib: OpenedLibrary<ZmqSymbol>;
  try {
    lib = openLibrary(path, ZMQ_SYMBOLS);
  } catch (e) {
    throw new LibzmqNotFoundError(path, e);
  }
  const v = [new Int32Array(1), new Int32Array(1), new Int32Array(1)] as const;
  lib.symbols.zmq_version(v[0], v[1], v[2]);
  const version = `${v[0][0]}.${v[1][0]}.${v[2][0]}`;
  if ((v[0][0] ?? 0) < 4) {
    lib.close();
    throw new LibzmqNotFoundError(path, new Error(`it is libzmq ${version}; LMPool needs libzmq 4 (libzmq.so.5)`));
  }
  opened = { path, lib, version };
  return opened;
}

/** Why libzmq does not load here, or undefined when it does (tests skip on the reason). */
export function libzmqUnavailable(): string | undefined {
  try {
    loadLibzmq();
    return undefined;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}
