/**
 * Stop strings over streamed text: emits text as soon as it can no longer be part of a stop
 * string, holds back a tail that is a prefix of one, and reports the first stop string that
 * completes (the text after it is dropped). Text pushed while not yet armed (a request's minTokens)
 * never stops the stream, but its held-back tail still counts: a stop string that starts before
 * arming and completes after it stops the stream, as vLLM's check of the newest text does.
 * @module
 */

/** Result of StopStringMatcher.push. */
export interface StopMatch {
  /** Text safe to emit now. */
  readonly text: string;
  /** The stop string that completed, or null. */
  readonly stop: string | null;
}

/** Matches stop strings across streamed text deltas. */
export class StopStringMatcher {
  readonly stops: readonly string[];
  readonly #includeStop: boolean;
  readonly #maxLen: number;
  #pending = "";
  #stopped: string | null = null;

  /** `includeStopString`: emit the stop string itself before stopping (default false, as OpenAI). */
  constructor(stops: readonly string[], options: { includeStopString?: boolean } = {}) {
    const empty = stops.findIndex((s) => typeof s !== "string" || s.length === 0);
    if (empty >= 0) {
      throw new RangeError(
        `stop strings must be non-empty strings, got ${JSON.stringify(stops[empty])} at index ${empty}`,
      );
    }
    this.stops = [...stops];
    this.#includeStop = options.includeStopString ?? false;
    this.#maxLen = Math.max(0, ...stops.map((s) => s.length));
  }

  /** The stop string that ended the stream, or null. */
  get stopped(): string | null {
    return this.#stopped;
  }

  /** Feeds a text delta; `armed` false: no stop string may end the stream yet. After a stop, further text is ignored. */
  push(delta: string, armed = true): StopMatch {
    if (this.#stopped !== null) return { text: "", stop: this.#stopped };
    const text = this.#pending + delta;
    let at = -1;
    let hit: string | null = null;
    for (const s of armed ? this.stops : []) {
      const i = text.indexOf(s);
      // Earliest start wins; at the same start, the longer stop string.
      if (i >= 0 && (at < 0 || i < at || (i === at && s.length > hit!.length))) {
        at = i;
        hit = s;
      }
    }
    if (hit !== null) {
      this.#stopped = hit;
      this.#pending = "";
      return { text: text.slice(0, this.#includeStop ? at + hit.length : at), stop: hit };
    }
    const hold = this.#heldLength(text);
    this.#pending = text.slice(text.length - hold);
    return { text: text.slice(0, text.length - hold), stop: null };
  }

  /** End of stream: the held-back text (none after a stop). */
  flush(): string {
    const rest = this.#pending;
    this.#pending = "";
    return rest;
  }

  /** Length of the longest suffix of `text` that is a proper prefix of some stop string. */
  #heldLength(text: string): number {
    for (let k = Math.min(text.length, this.#maxLen - 1); k > 0; k--) {
      const tail = text.slice(text.length - k);
      if (this.stops.some((s) => s.length > k && s.startsWith(tail))) return k;
    }
    return 0;
  }
}
