/**
 * Errors of the control-plane protocol: malformed frames, remote error replies, request timeouts
 * and closed connections. Each names the message type (and field) that caused it.
 * @module
 */

/** A frame or message could not be decoded or failed its schema; the connection stays usable. */
export class ProtocolError extends Error {
  override readonly name = "ProtocolError";
  constructor(
    message: string,
    /** Machine-readable reason: bad_length, bad_magic, undecodable, unknown_type, schema. */
    readonly code: "bad_length" | "bad_magic" | "undecodable" | "unknown_type" | "schema" | "unencodable",
    readonly details: { messageType?: string; field?: string; id?: number } = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The peer answered a request with an `error` message. */
export class RemoteError extends Error {
  override readonly name = "RemoteError";
  constructor(
    message: string,
    readonly code: string,
    readonly details: { messageType?: string; field?: string } = {},
  ) {
    super(message);
  }
}

/** A request got no reply within its timeout. */
export class RequestTimeoutError extends Error {
  override readonly name = "RequestTimeoutError";
  constructor(
    readonly messageType: string,
    readonly id: number,
    readonly timeoutMs: number,
  ) {
    super(`no reply to ${messageType} #${id} within ${timeoutMs} ms`);
  }
}

/** The connection closed (or its peer was declared dead) before a reply came. */
export class ConnectionClosedError extends Error {
  override readonly name = "ConnectionClosedError";
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}
