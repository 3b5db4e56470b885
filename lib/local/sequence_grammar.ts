/**
 * Structured outputs on one device: the model's grammar engine, loaded on the first constrained
 * request (building xgrammar's view of a 150k-token vocabulary takes a few hundred ms, which a
 * server that never sees one should not pay), and each constrained sequence's matcher.
 *
 * A matcher follows its sequence's output tokens by count: before each step it is fed the output
 * tokens it has not seen, so a token is fed once whatever happens between steps (a preempted
 * sequence recomputes its context but keeps its output, and is not fed again). After each sampled
 * token the engine asks {@link SequenceGrammar.advance}: the grammar may reject it (the mask makes
 * that impossible unless a caller bypassed it), or be complete (its stop token accepted, or no stop
 * token the model can sample), which ends the sequence with finish reason stop, `ignore_eos` or
 * not: a structured output ends where its grammar does, as in vLLM.
 * @module
 */
import { GrammarError } from "../core/errors.ts";
import type { GrammarSpec } from "../core/grammar_spec.ts";
import type { Sequence } from "../core/sequence.ts";
import { GrammarEngine, type GrammarMatcher } from "../model/grammar/grammar_engine.ts";
import type { TokenMask } from "../model/grammar/token_mask.ts";
import type { GrammarVocabulary } from "../model/grammar/vocabulary.ts";

/** Where the grammar engine comes from: the vocabulary, built on first use. */
export type GrammarVocabularySource = () => GrammarVocabulary;

/** What a sequence's grammar says after its newest token. */
export type GrammarVerdict = "continue" | "end" | { rejected: number };

/** One constrained sequence's matcher, fed by output-token count. */
export class SequenceGrammar {
  /** Output tokens fed so far. */
  #fed = 0;
  readonly #matcher: GrammarMatcher;

  constructor(matcher: GrammarMatcher) {
    this.#matcher = matcher;
  }

  /** Feeds the output tokens not fed yet; a rejected token stops the feed and is returned. */
  #sync(seq: Sequence): GrammarVerdict {
    const ids = seq.tokenIds;
    const start = seq.numPromptTokens;
    for (; this.#fed < ids.length - start; this.#fed++) {
      if (this.#matcher.terminated) continue; // complete: nothing after it is constrained
      const token = ids[start + this.#fed]!;
      if (!this.#matcher.accept(token)) return { rejected: token };
    }
    return "continue";
  }

  /**
   * After a sampled token: feeds it, and says whether the output must end here. The next token's
   * mask is left for the next step, which computes it while the device runs its forward pass; only
   * a vocabulary without a stop token needs it now, to end a grammar that can only end.
   */
  advance(seq: Sequence): GrammarVerdict {
    const v = this.#sync(seq);
    if (v !== "continue") return v;
    if (this.#matcher.terminated) return "end";
    if (this.#matcher.canStop) return "continue";
    const m = this.#matcher.mask();
    return m.allowed !== undefined && m.allowed.length === 0 ? "end" : "continue";
  }

  /** The constraint of `seq`'s next token, or null once the grammar is done. */
  mask(seq: Sequence): TokenMask | null {
    const v = this.#sync(seq);
    if (typeof v === "object") throw new GrammarError(`token ${v.rejected} does not match the grammar`);
    return this.#matcher.terminated ? null : this.#matcher.mask();
  }

  /**
   * Computes the constraint {@link mask} will return, ahead and faster (GrammarMatcher.prepareMask);
   * a rejected output token is left for `mask` to report.
   */
  async prepareMask(seq: Sequence): Promise<void> {
    if (this.#sync(seq) === "continue") await this.#matcher.prepareMask();
  }

  dispose(): void {
    this.#matcher.dispose();
  }
}

/** The grammar engine of one device and the matchers of its constrained sequences. */
export class DeviceGrammars {
  readonly #vocabulary: GrammarVocabularySource | null;
  #engine: GrammarEngine | null = null;
  #loading: Promise<GrammarEngine> | null = null;
  /** Why loading failed (then every constrained request is refused with it, none waits again). */
  #failed: Error | null = null;
  readonly #bySeq = new Map<Sequence, SequenceGrammar>();

  /** `vocabulary` null: this device has no tokenizer, and constrained requests are refused. */
  constructor(vocabulary: GrammarVocabularySource | null) {
    this.#vocabulary = vocabulary;
  }

  /**
   * Whether {@link add} answers now, without awaiting {@link load}: the engine loaded, or its load
   * failed (then `add` refuses with the reason).
   */
  get settled(): boolean {
    return this.#engine !== null || this.#failed !== null;
  }

  /** Loads the grammar engine (once; a failure is kept, not retried). */
  load(): Promise<GrammarEngine> {
    if (!this.#vocabulary) {
      return Promise.reject(new GrammarError("this engine has no tokenizer for structured outputs"));
    }
    const vocabulary = this.#vocabulary;
    // Reading the vocabulary can throw at once (a malformed tokenizer.json): a rejection all the same.
    this.#loading ??= Promise.resolve().then(() => GrammarEngine.create(vocabulary())).then(
      (e) => this.#engine = e,
      (e: unknown) => {
        this.#failed = new GrammarError(`the grammar engine could not load: ${(e as Error).message}`);
        throw this.#failed;
      },
    );
    return this.#loading;
  }

  /** Starts `seq`'s matcher; throws GrammarError when the engine is not loaded or the spec fails. */
  add(seq: Sequence, spec: GrammarSpec): void {
    if (this.#failed) throw new GrammarError(`request ${seq.requestId}: ${this.#failed.message}`);
    if (!this.#engine) {
      throw new GrammarError(`request ${seq.requestId}: structured outputs need the grammar engine loaded first`);
    }
    const g = new SequenceGrammar(this.#engine.matcher(spec));
    if (g.advance(seq) === "end") {
      g.dispose();
      throw new GrammarError(
        `request ${seq.requestId}: the grammar matches only the empty output and the model cannot sample a stop token`,
      );
    }
    this.#bySeq.set(seq, g);
  }

  /** `seq`'s grammar, if it is constrained. */
  of(seq: Sequence): SequenceGrammar | undefined {
    return this.#bySeq.get(seq);
  }

  /** Frees `seq`'s matcher (finish, abort, error). Idempotent. */
  release(seq: Sequence): void {
    this.#bySeq.get(seq)?.dispose();
    this.#bySeq.delete(seq);
  }

  /** Constrained sequences alive (for tests: zero once a workload drains). */
  get size(): number {
    return this.#bySeq.size;
  }
}
