/**
 * The one door to xgrammar (`@mlc-ai/web-xgrammar`, xgrammar compiled to WebAssembly; its .wasm is
 * embedded in the package's JavaScript, so nothing is fetched). Nothing else imports the package.
 *
 * Two facts of that build shape this module:
 * - Its JavaScript API is async (every call first awaits the module's one-time start), while the
 *   engine step that masks tokens is synchronous. Once started, the embind objects underneath are
 *   synchronous, so after {@link loadXGrammar} this module calls them directly: the compiler's
 *   methods, the matcher's class (the constructor of a matcher made once at load) and the bitmask
 *   vector. The package version is pinned in package.json for that reason, and test/unit/model/
 *   grammar tests every path here.
 * - A compile error in xgrammar's C++ is a WebAssembly abort: the message goes to the module's
 *   stderr (console.error, bound when the module starts) and a bare "Aborted()" is thrown. The
 *   message is captured by routing console.error through a sink during calls. An aborted call
 *   does not unwind, so the instance leaks its stack and heap and, after a few thousand aborts,
 *   breaks: an instance that aborted is marked `poisoned`. Specs are therefore checked in a
 *   throwaway thread first (grammar_checker.ts), and a worker compiles only checked specs.
 * - Its JavaScript is a UMD bundle: Bun gives its named exports, Deno's ESM loader does not, so it
 *   is imported on first use (importing LMPool under Deno works; structured outputs need Bun).
 * @module
 */
import type {
  CompiledGrammar as XCompiledGrammar,
  Grammar as XGrammarClass,
  GrammarCompiler as XGrammarCompiler,
  GrammarMatcher as XGrammarMatcher,
  TokenizerInfo as XTokenizerInfo,
} from "@mlc-ai/web-xgrammar";
import { GrammarError } from "../../core/errors.ts";
import type { GrammarSpec } from "../../core/grammar_spec.ts";
import type { GrammarVocabulary } from "./vocabulary.ts";

/** An embind object: its methods are called by name, `delete()` frees it. */
// deno-lint-ignore no-explicit-any
type Handle = any;

type XGrammarModule = typeof import("@mlc-ai/web-xgrammar");

let captured: string[] | null = null;
let loading: Promise<XGrammar> | null = null;

/** The xgrammar message of an aborted call: its "[FATAL] file:line: " prefix dropped. */
function messageOf(lines: readonly string[], e: unknown): string {
  const fatal = lines.find((l) => l.startsWith("[FATAL]"));
  if (fatal) return fatal.replace(/^\[FATAL\]\s*\S+:\d+:\s*/, "").replace(/^Check failed: \(.*?\) is false: /, "");
  return e instanceof Error ? e.message : String(e);
}

/** How a spec's grammar is built without a tokenizer (checking) and compiled with one. */
function grammarOf(spec: GrammarSpec, GrammarCtor: Handle): Handle {
  // vLLM's defaults: any whitespace unless disabled, no indent (one line when whitespace is fixed), strict.
  const anyWhitespace = spec.disableAnyWhitespace !== true;
  switch (spec.kind) {
    case "json_schema":
      return GrammarCtor.FromJSONSchema(spec.text, anyWhitespace, undefined, undefined, true, undefined, false);
    case "json_object":
      // Any JSON object, as vLLM's xgrammar backend compiles json_object (the builtin JSON grammar
      // would also take arrays and scalars).
      return GrammarCtor.FromJSONSchema(
        '{"type": "object"}',
        anyWhitespace,
        undefined,
        undefined,
        true,
        undefined,
        false,
      );
    case "regex":
      return GrammarCtor.FromStructuralTag(regexTag(spec.text));
    case "ebnf":
      return GrammarCtor.FromEBNF(spec.text, "root");
  }
}

/** The web build has no regex compiler of its own: a structural tag whose format is the regex. */
function regexTag(pattern: string): string {
  return JSON.stringify({ type: "structural_tag", format: { type: "regex", pattern } });
}

/** One started xgrammar instance (one per thread: the package keeps its module in a global). */
export class XGrammar {
  #poisoned = false;
  /** The embind Grammar class (its statics parse grammars). */
  readonly #Grammar: Handle;
  /** The embind GrammarMatcher class. */
  readonly #Matcher: Handle;

  /** Use {@link loadXGrammar}: the classes come from a started module. */
  constructor(GrammarCtor: Handle, MatcherCtor: Handle) {
    this.#Grammar = GrammarCtor;
    this.#Matcher = MatcherCtor;
  }

  /** True once a call aborted: the instance must not be trusted any more. */
  get poisoned(): boolean {
    return this.#poisoned;
  }

  /** Runs `f` on the instance, turning an abort into a GrammarError with xgrammar's message. */
  run<T>(f: () => T): T {
    if (this.#poisoned) throw new GrammarError("the grammar engine failed earlier (an aborted compile); restart it");
    captured = [];
    try {
      return f();
    } catch (e) {
      if (e instanceof WebAssembly.RuntimeError) this.#poisoned = true;
      throw new GrammarError(messageOf(captured, e), { cause: e });
    } finally {
      captured = null;
    }
  }

  /** Parses a spec into a grammar without a tokenizer, to check it; throws GrammarError. */
  check(spec: GrammarSpec): void {
    this.run(() => grammarOf(spec, this.#Grammar).delete());
  }

  /** A compiler for one vocabulary (async: the package makes tokenizer infos and compilers so). */
  async compiler(vocab: GrammarVocabulary): Promise<XCompiler> {
    const x = await importXGrammar();
    const info = await x.TokenizerInfo.createTokenizerInfo(
      vocab.tokens,
      vocab.vocabType,
      false,
      vocab.vocabSize,
      [...vocab.stopTokenIds],
    );
    const compiler = await x.GrammarCompiler.createGrammarCompiler(info);
    return new XCompiler(this, x, compiler, info, this.#Grammar, this.#Matcher, vocab.vocabSize);
  }
}

/** A compiled grammar, shared by the matchers made from it. */
export interface XCompiled {
  readonly handle: Handle;
  dispose(): void;
}

/** Compiles specs for one vocabulary and makes matchers, synchronously. */
export class XCompiler {
  #disposed = false;

  constructor(
    readonly engine: XGrammar,
    readonly x: XGrammarModule,
    readonly compiler: XGrammarCompiler,
    readonly info: XTokenizerInfo,
    readonly grammarCtor: Handle,
    readonly matcherCtor: Handle,
    readonly vocabSize: number,
  ) {}

  /** Compiles a spec; throws GrammarError with xgrammar's message. */
  compile(spec: GrammarSpec): XCompiled {
    if (this.#disposed) throw new Error("XCompiler used after dispose()");
    const handle = this.engine.run(() => {
      const grammar = grammarOf(spec, this.grammarCtor);
      try {
        return this.compiler.handle.CompileGrammar(grammar);
      } finally {
        grammar.delete();
      }
    });
    const compiled = new this.x.CompiledGrammar(handle);
    let freed = false;
    return {
      handle,
      dispose: () => {
        if (!freed) compiled.dispose(), freed = true;
      },
    };
  }

  /** A matcher at the start of `compiled`; stop tokens are the vocabulary's. */
  matcher(compiled: XCompiled): XMatcher {
    const handle = this.engine.run(() => new this.matcherCtor(compiled.handle, undefined, false, -1));
    // The package's constructor is private in its types: its factory would make another handle.
    const View = this.x.GrammarMatcher as unknown as new (handle: Handle, vocabSize: number) => XGrammarMatcher;
    return new XMatcher(this.engine, handle, this.vocabSize, new View(handle, this.vocabSize));
  }

  /** Frees the compiler and its tokenizer info. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.compiler.dispose();
    this.info.dispose();
  }
}

/** One sequence's matching state. */
export class XMatcher {
  #disposed = false;
  /** Bitmask words: ceil(vocabSize / 32). */
  readonly words: number;

  /**
   * The package's own object over the same handle: its bitmask method reads the result through a
   * typed view of the module's memory, which this module cannot reach (it is the package's).
   */
  readonly #view: XGrammarMatcher;

  constructor(readonly engine: XGrammar, readonly handle: Handle, readonly vocabSize: number, view: XGrammarMatcher) {
    this.words = Math.ceil(vocabSize / 32);
    this.#view = view;
  }

  /** Feeds one token; false when the grammar rejects it (the state is then unchanged). */
  accept(token: number): boolean {
    return this.engine.run(() => this.handle.AcceptToken(token, false) as boolean);
  }

  /** True once a stop token was accepted: the grammar is done. */
  get terminated(): boolean {
    return this.handle.IsTerminated() as boolean;
  }

  /**
   * As {@link fillBitmask}, with one copy of the bitmask instead of a call into the module per
   * word, which for a large vocabulary costs far more than computing the mask; asynchronous only
   * because the package's method is (it settles without waiting for anything once the module runs).
   */
  async fillBitmaskFast(out: Int32Array): Promise<void> {
    if (this.engine.poisoned) {
      throw new GrammarError("the grammar engine failed earlier (an aborted compile); restart it");
    }
    let bits: Int32Array;
    try {
      bits = await this.#view.getNextTokenBitmask();
    } catch (e) {
      throw new GrammarError(e instanceof Error ? e.message : String(e), { cause: e });
    }
    out.set(bits.subarray(0, out.length));
  }

  /** Writes the next-token bitmask into `out` (bit t of word t >> 5: token t is allowed). */
  fillBitmask(out: Int32Array): void {
    this.engine.run(() => {
      const v = this.handle.GetNextTokenBitmask(this.vocabSize);
      try {
        const n = Math.min(v.size() as number, out.length);
        for (let i = 0; i < n; i++) out[i] = v.get(i);
      } finally {
        v.delete();
      }
    });
  }

  /** Frees the matcher. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.handle.delete();
  }
}

/** The package's exports, or a GrammarError where the runtime does not give them. */
async function importXGrammar(): Promise<XGrammarModule> {
  const m = await import("@mlc-ai/web-xgrammar") as Partial<XGrammarModule> & { default?: XGrammarModule };
  const x = m.GrammarCompiler ? m : m.default?.GrammarCompiler ? m.default : undefined;
  if (!x) throw new GrammarError("@mlc-ai/web-xgrammar does not load in this runtime: structured outputs need Bun");
  return x as XGrammarModule;
}

/**
 * Starts xgrammar in this thread (once; later calls share it). console.error is routed through a
 * sink while the module starts, since the module binds its stderr to console.error then.
 */
export function loadXGrammar(): Promise<XGrammar> {
  loading ??= (async () => {
    const x = await importXGrammar();
    const original = console.error;
    const sink = (...args: unknown[]) => captured ? captured.push(args.map(String).join(" ")) : original(...args);
    console.error = sink;
    let probe: XGrammarClass | undefined;
    let info: XTokenizerInfo | undefined;
    let compiler: XGrammarCompiler | undefined;
    let compiled: XCompiledGrammar | undefined;
    let matcher: XGrammarMatcher | undefined;
    try {
      probe = await x.Grammar.fromEBNF('root ::= "a"');
      info = await x.TokenizerInfo.createTokenizerInfo(["a"], "raw", false, 1, [0]);
      compiler = await x.GrammarCompiler.createGrammarCompiler(info, false);
      compiled = await compiler.compileGrammar(probe);
      matcher = await x.GrammarMatcher.createGrammarMatcher(compiled);
      const handleOf = (o: object): Handle => (o as { handle: Handle }).handle;
      return new XGrammar(handleOf(probe).constructor, handleOf(matcher).constructor);
    } finally {
      console.error = original;
      for (const o of [matcher, compiled, compiler, info, probe]) o?.dispose();
    }
  })();
  return loading;
}
