/**
 * Heartbeats: send one every interval, and declare the peer dead once nothing at all (heartbeat or
 * other traffic) has arrived for `missLimit` intervals.
 *
 * Two things keep a slow but live peer from being called dead:
 * - Our own stalls do not count. A check that runs late (this event loop was blocked, so the
 *   peer's frames sat unread in the socket) adds its lateness to the peer's last-seen time: only
 *   silence this side could have observed counts.
 * - A peer about to block its own event loop (a step computed on its thread) says so with a busy
 *   heartbeat carrying the step's expected length; until it is heard from again, the silence it
 *   may keep grows by {@link BUSY_GRACE_FACTOR} times that (at most {@link MAX_BUSY_GRACE_MS}). A
 *   peer stuck for good (stopped, an endless loop) is still declared dead: after
 *   `missLimit * intervalMs` plus that bounded grace.
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

/** A busy peer may stay silent this many times its announced step length on top of the usual limit. */
export const BUSY_GRACE_FACTOR = 4;
/** Upper bound of the busy grace, whatever the peer announces. */
export const MAX_BUSY_GRACE_MS = 60_000;
/** A check later than this is counted as our own stall (timer jitter stays below it). */
const STALL_THRESHOLD_MS = 50;

/** Drives the send timer and the silence check of one connection. */
export class HeartbeatMonitor {
  #lastSeen: number;
  #lastTick: number;
  #graceMs = 0;
  #seq = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  #dead = false;
  /** Milliseconds of this side's own stalls discounted so far. */
  ownStallMs = 0;

  constructor(
    readonly options: HeartbeatOptions,
    private readonly sendBeat: (seq: number, sentAt: number) => void,
    private readonly onDead: (silentMs: number) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.#lastSeen = this.#lastTick = now();
    if (!(options.intervalMs > 0)) throw new RangeError(`heartbeat intervalMs must be > 0, got ${options.intervalMs}`);
    if (!Number.isInteger(options.missLimit) || options.missLimit < 1) {
      throw new RangeError(`heartbeat missLimit must be an integer >= 1, got ${options.missLimit}`);
    }
  }

  /** Milliseconds of silence after which the peer counts as dead (without a busy grace). */
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
    this.#lastSeen = this.#lastTick = this.now();
    this.#timer = setInterval(() => this.tick(), this.options.intervalMs);
    // Heartbeats alone must not keep a process alive.
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** Records traffic from the peer. */
  heard(): void {
    this.#lastSeen = this.now();
    this.#graceMs = 0;
  }

  /** The peer is about to be busy for about `expectedMs` without a word. */
  heardBusy(expectedMs: number): void {
    this.#lastSeen = this.now();
    this.#graceMs = Math.min(MAX_BUSY_GRACE_MS, BUSY_GRACE_FACTOR * Math.max(0, expectedMs));
  }

  /** Stops the timer (idempotent). */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One check: discount our own lateness, then judge the peer's silence. Public for tests. */
  tick(now = this.now()): void {
    if (this.#dead) return;
    const late = now - this.#lastTick - this.options.intervalMs;
    this.#lastTick = now;
    if (late > STALL_THRESHOLD_MS) {
      this.ownStallMs += late;
      this.#lastSeen = Math.min(now, this.#lastSeen + late);
    }
    const silent = now - this.#lastSeen;
    if (silent > this.deadAfterMs + this.#graceMs) {
      this.#dead = true;
      this.stop();
      this.onDead(silent);
      return;
    }
    this.sendBeat(this.#seq++, now);
  }
}
