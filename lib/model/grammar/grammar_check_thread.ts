/**
 * The body of the grammar check thread: parses each spec it is sent with xgrammar (no tokenizer
 * needed) and answers whether it compiles, with xgrammar's message when not. It runs apart from
 * the serving threads because a failed parse aborts the WebAssembly instance (see xgrammar.ts):
 * after one, the thread says so and its parent replaces it.
 * @module
 */
import type { GrammarSpec } from "../../core/grammar_spec.ts";
import { serveThread } from "../../runtime/threads.ts";
import { loadXGrammar } from "./xgrammar.ts";

/** One spec to check. */
export interface GrammarCheckJob {
  id: number;
  spec: GrammarSpec;
}

/** The answer: `poisoned` when the thread's instance aborted and must be replaced. */
export type GrammarCheckReply =
  | { id: number; ok: true }
  | { id: number; ok: false; message: string; poisoned: boolean };

const engine = loadXGrammar();

serveThread(async (message, reply) => {
  const job = message as GrammarCheckJob;
  const x = await engine;
  try {
    x.check(job.spec);
    reply({ id: job.id, ok: true } satisfies GrammarCheckReply);
  } catch (e) {
    reply({ id: job.id, ok: false, message: (e as Error).message, poisoned: x.poisoned } satisfies GrammarCheckReply);
  }
});
