/**
 * The two errors of the libzmq binding: the library is missing (what to install), and a libzmq
 * call failed (which call, on what, and the errno's name).
 * @module
 */

/** libzmq could not be opened; the message is one line saying what to install. */
export class LibzmqNotFoundError extends Error {
  override readonly name = "LibzmqNotFoundError";
  constructor(
    readonly path: string,
    cause: unknown,
  ) {
    const why = cause instanceof Error ? cause.message.replace(/\s*\n\s*/g, "; ") : String(cause);
    super(
      `KV events need libzmq (${path}), which does not load (${why}); install it with \`apt-get install libzmq5\` (Debian/Ubuntu) or point LMPOOL_LIBZMQ at libzmq.so.5`,
      { cause },
    );
  }
}

/** errno names of the failures a ZeroMQ call reports (Linux numbering; libzmq's own above 156384712). */
const ERRNO_NAMES: Readonly<Record<number, string>> = {
  1: "EPERM",
  2: "ENOENT",
  4: "EINTR",
  11: "EAGAIN",
  12: "ENOMEM",
  13: "EACCES",
  14: "EFAULT",
  19: "ENODEV",
  22: "EINVAL",
  24: "EMFILE",
  88: "ENOTSOCK",
  93: "EPROTONOSUPPORT",
  95: "ENOTSUP",
  98: "EADDRINUSE",
  99: "EADDRNOTAVAIL",
  105: "ENOBUFS",
  111: "ECONNREFUSED",
  113: "EHOSTUNREACH",
  156384763: "EFSM",
  156384764: "ENOCOMPATPROTO",
  156384765: "ETERM",
  156384766: "EMTHREAD",
};

/** What an errno means to a user, where it is common enough to say. */
const ERRNO_HINTS: Readonly<Record<string, string>> = {
  EADDRINUSE: "the address is in use",
  EADDRNOTAVAIL: "no local interface has that address",
  EPROTONOSUPPORT: "libzmq does not support that transport",
  EINVAL: "invalid argument (an endpoint must look like tcp://*:5557 or tcp://host:5557)",
  ENODEV: "no such network interface",
};

/** A libzmq call failed; `errno` is libzmq's error number and `code` its name. */
export class ZmqError extends Error {
  override readonly name = "ZmqError";
  readonly code: string;
  constructor(
    readonly call: string,
    readonly errno: number,
    what = "",
  ) {
    const code = ERRNO_NAMES[errno] ?? `errno ${errno}`;
    const hint = ERRNO_HINTS[code];
    super(`${call}${what ? ` ${what}` : ""} failed: ${code}${hint ? ` (${hint})` : ""}`);
    this.code = code;
  }
}
