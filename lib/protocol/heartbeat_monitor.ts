/**
 * Heartbeats: send one every interval, and declare the peer dead once nothing at all (heartbeat or
 * other traffic) has arrived for `missLimit` intervals.
 * @module
 */

/** Heartbeat timing. */
export interface HeartbeatOptions {
  /** Milliseconds between heartbeats (default 1000). */
  intervalMs: number;
  /** Missed intervals before the peer is declared dead (default 5). */
  missLimit: number;
}

/** Default heartbeat timing: 1 s interval, dead after 5 silent seconds. */
export const DEFAULT_HEARTBEAT: Readonly<HeartbeatOptions> = Object.freeze({ intervalMs: 1000, missLimit: 5 });

/** Drives the send timer and the silence check of one connection. */
export class HeartbeatMonitor {
  #lastSeen = Date.now();
  #seq = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  #dead = false;

  constructor(
    readonly options: HeartbeatOptions,
    private readonly sendBeat: (seq: number, sentAt: number) => void,
    private readonly onDead: (silentMs: number) => void,
  ) {
    if (!(options.intervalMs > 0)) throw new RangeError(`heartbeat intervalMs must be > 0, got ${options.intervalMs}`);
    if (!Number.isInteger(options.missLimit) || options.missLimit < 1) throw new RangeError(`heartbeat missLimit must be an integer >= 1, got ${options.missLimit}`);
  }

  /** Milliseconds of silence after which the peer counts as dead. */
  get deadAfterMs(): number {
    return this.options.intervalMs * this.options.missLimit;
  }

  /** When the peer was last heard from (ms since the epoch). */
  get lastSeen(): number {
    return this.#lastSeen;
  }

  /** Starts sending and checking. */
  start(): void {
    if (this.#timer) return;
    this.#lastSeen = Date.now();
    this.#timer = setInterval(() => this.#tick(), this.options.intervalMs);
    // Heartbeats alone must not keep a process alive.
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** Records traffic from the peer. */
  heard(): void {
    this.#lastSeen = Date.now();
  }

  /** Stops the timer (idempotent). */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #tick(): void {
    if (this.#dead) return;
    const now = Date.now();
    const silent = now - this.#lastSeen;
    if (silent > this.deadAfterMs) {
      this.#dead = true;
      this.stop();
      this.onDead(silent);
      return;
    }
    this.sendBeat(this.#seq++, now);
  }
}
