/**
 * Checks grammar specs before any engine compiles them: the server (for a 400 before dispatch), the
 * launcher and the in-process LLM ask here first, so a bad schema, regex or grammar never reaches
 * the instance a worker's matchers live in. Checks run on one helper thread (started on first use,
 * idle it does not keep the process alive), replaced after a check that aborted its instance; the
 * checks it still held are sent to the new one.
 * @module
 */
import { GrammarError } from "../../core/errors.ts";
import { checkGrammarSpec, type GrammarSpec, grammarSpecKey } from "../../core/grammar_spec.ts";
import { startThread, type Thread } from "../../runtime/threads.ts";
import type { GrammarCheckJob, GrammarCheckReply } from "./grammar_check_thread.ts";

interface Pending {
  job: GrammarCheckJob;
  resolve: () => void;
  reject: (e: Error) => void;
}

let thread: Thread | null = null;
let nextId = 0;
const pending = new Map<number, Pending>();

function start(): Thread {
  const t = startThread(new URL("./grammar_check_thread.ts", import.meta.url), {
    onMessage: (m) => onReply(t, m as GrammarCheckReply),
    onError: (e) => {
      // The thread itself failed (not a spec): every check it held fails with the reason.
      if (thread === t) thread = null;
      t.terminate();
      for (const p of pending.values()) p.reject(new Error(`the grammar check thread failed: ${e.message}`));
      pending.clear();
    },
  });
  return t;
}

function onReply(t: Thread, r: GrammarCheckReply): void {
  const p = pending.get(r.id);
  if (p) {
    pending.delete(r.id);
    if (r.ok) p.resolve();
    else p.reject(new GrammarError(r.message));
  }
  if (!r.ok && r.poisoned && thread === t) {
    t.terminate();
    thread = null;
    if (pending.size > 0) {
      thread = start();
      for (const q of pending.values()) thread.post(q.job);
    }
  }
  if (pending.size === 0) thread?.keepAlive(false);
}

/** Specs that compiled, most recent last (a request's n choices, and repeats, pass at once). */
const passed = new Set<string>();
const MAX_PASSED = 256;

/** Resolves when `spec` compiles; rejects with a GrammarError carrying xgrammar's message when not. */
export async function checkGrammar(spec: GrammarSpec): Promise<void> {
  const key = grammarSpecKey(spec);
  if (passed.has(key)) {
    passed.delete(key);
    passed.add(key);
    return;
  }
  await compileCheck(spec);
  passed.add(key);
  if (passed.size > MAX_PASSED) passed.delete(passed.values().next().value!);
}

function compileCheck(spec: GrammarSpec): Promise<void> {
  const job: GrammarCheckJob = { id: nextId++, spec: { ...spec } };
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  pending.set(job.id, { job, resolve, reject });
  thread ??= start();
  thread.keepAlive(true);
  thread.post(job);
  return promise;
}

/**
 * An engine's check of a request's structured output before it is submitted: its shape, then a
 * compile apart (a bad spec is a GrammarError for the caller and never reaches a worker's grammar
 * instance). Nothing to do without one.
 */
export async function checkStructuredOutput(spec: GrammarSpec | undefined): Promise<void> {
  if (spec === undefined) return;
  checkGrammarSpec(spec);
  await checkGrammar(spec);
}
