/**
 * Structured outputs for one model: compiles grammar specs against the model's vocabulary (the
 * compiled grammars of the most recent specs kept in a bounded LRU, since requests repeat their
 * schemas) and makes one matcher per constrained sequence. A matcher feeds on the sequence's
 * sampled tokens and answers the next step's constraint as a {@link TokenMask}. Everything after
 * {@link GrammarEngine.create} is synchronous, so the engine step can use it.
 * @module
 */
import { GrammarError } from "../../core/errors.ts";
import { type GrammarSpec, grammarSpecKey } from "../../core/grammar_spec.ts";
import { type TokenMask, tokenMaskOf } from "./token_mask.ts";
import type { GrammarVocabulary } from "./vocabulary.ts";
import { loadXGrammar, type XCompiled, type XCompiler, type XMatcher } from "./xgrammar.ts";

/** Compiled grammars kept by default. */
export const DEFAULT_GRAMMAR_CACHE_SIZE = 64;

/** A compiled grammar with the matchers that still use it (freed when both the cache and they let go). */
class CacheEntry {
  users = 0;
  cached = true;
  constructor(readonly compiled: XCompiled) {}
  release(): void {
    if (!this.cached && this.users === 0) this.compiled.dispose();
  }
}

/** One sequence's grammar state. */
export class GrammarMatcher {
  readonly #matcher: XMatcher;
  readonly #entry: CacheEntry;
  readonly #bits: Int32Array;
  readonly #vocabSize: number;
  #mask: TokenMask | null = null;
  #disposed = false;
  /**
   * The vocabulary has a stop token, so a grammar that can only end still allows one: its mask is
   * never empty (see {@link mask}).
   */
  readonly canStop: boolean;

  constructor(matcher: XMatcher, entry: CacheEntry, vocabSize: number, canStop: boolean) {
    this.#matcher = matcher;
    this.#entry = entry;
    this.#vocabSize = vocabSize;
    this.canStop = canStop;
    this.#bits = new Int32Array(matcher.words);
    entry.users++;
  }

  /** Feeds a sampled token; false when the grammar rejects it (the state is then unchanged). */
  accept(token: number): boolean {
    this.#check();
    const ok = this.#matcher.accept(token);
    if (ok) this.#mask = null;
    return ok;
  }

  /** True once a stop token was accepted: the output is complete and no longer constrained. */
  get terminated(): boolean {
    this.#check();
    return this.#matcher.terminated;
  }

  /**
   * The next token's constraint (computed once per state). When the grammar can only end, it
   * allows the stop tokens alone; `allowed` is empty when it can only end and the vocabulary has
   * no stop token.
   */
  mask(): TokenMask {
    this.#check();
    if (!this.#mask) {
      this.#matcher.fillBitmask(this.#bits);
      this.#mask = tokenMaskOf(this.#bits, this.#vocabSize);
    }
    return this.#mask;
  }

  /**
   * Computes {@link mask} ahead, the fast way (see XMatcher.fillBitmaskFast), so that the next
   * `mask()` finds it.
   */
  async prepareMask(): Promise<void> {
    this.#check();
    if (this.#mask || this.#matcher.terminated) return;
    await this.#matcher.fillBitmaskFast(this.#bits);
    this.#mask = tokenMaskOf(this.#bits, this.#vocabSize);
  }

  /** Frees the matcher. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#matcher.dispose();
    this.#entry.users--;
    this.#entry.release();
  }

  #check(): void {
    if (this.#disposed) throw new Error("GrammarMatcher used after dispose()");
  }
}

/** Compiles specs for one vocabulary and makes matchers. */
export class GrammarEngine {
  readonly vocabSize: number;
  /** The vocabulary has a stop token. */
  readonly canStop: boolean;
  readonly #compiler: XCompiler;
  readonly #cacheSize: number;
  /** Insertion order is recency: a hit moves its entry to the end. */
  readonly #cache = new Map<string, CacheEntry>();
  #disposed = false;

  private constructor(compiler: XCompiler, vocabSize: number, canStop: boolean, cacheSize: number) {
    this.#compiler = compiler;
    this.vocabSize = vocabSize;
    this.canStop = canStop;
    this.#cacheSize = cacheSize;
  }

  /** Loads xgrammar and builds its tokenizer info for `vocab` (a few hundred ms for 150k tokens). */
  static async create(vocab: GrammarVocabulary, options: { cacheSize?: number } = {}): Promise<GrammarEngine> {
    const cacheSize = options.cacheSize ?? DEFAULT_GRAMMAR_CACHE_SIZE;
    if (!Number.isInteger(cacheSize) || cacheSize < 1) throw new RangeError(`cacheSize must be >= 1, got ${cacheSize}`);
    const x = await loadXGrammar();
    return new GrammarEngine(await x.compiler(vocab), vocab.vocabSize, vocab.stopTokenIds.length > 0, cacheSize);
  }

  /** Compiled grammars held by the cache. */
  get cachedGrammars(): number {
    return this.#cache.size;
  }

  /**
   * A matcher at the start of `spec`'s grammar; throws GrammarError with xgrammar's message when
   * the spec does not compile. Check specs from outside with checkGrammar first: a compile error
   * here costs this engine's instance (see xgrammar.ts).
   */
  matcher(spec: GrammarSpec): GrammarMatcher {
    if (this.#disposed) throw new Error("GrammarEngine used after dispose()");
    const entry = this.#entry(spec);
    return new GrammarMatcher(this.#compiler.matcher(entry.compiled), entry, this.vocabSize, this.canStop);
  }

  #entry(spec: GrammarSpec): CacheEntry {
    const key = grammarSpecKey(spec);
    let entry = this.#cache.get(key);
    if (entry) {
      this.#cache.delete(key);
      this.#cache.set(key, entry);
      return entry;
    }
    if (this.#compiler.engine.poisoned) {
      throw new GrammarError("the grammar engine failed on an earlier spec and cannot compile more");
    }
    entry = new CacheEntry(this.#compiler.compile(spec));
    this.#cache.set(key, entry);
    while (this.#cache.size > this.#cacheSize) {
      const [oldKey, old] = this.#cache.entries().next().value!;
      this.#cache.delete(oldKey);
      old.cached = false;
      old.release();
    }
    return entry;
  }

  /** Frees the cached grammars and the compiler (matchers still alive keep theirs). Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const e of this.#cache.values()) e.cached = false, e.release();
    this.#cache.clear();
    this.#compiler.dispose();
  }
}
