/**
 * The body of one tokenizer thread: loads the model directory's tokenizer and chat template, then
 * encodes, renders chat templates and decodes on request, so large inputs never occupy the thread
 * that relays the workers' heartbeats. Started by the server's tokenizer pool; the message shapes
 * are the TokenizerThread* types below.
 * @module
 */
import { join } from "node:path";
import type { ChatMessage, ChatRenderOptions } from "../core/engine_api.ts";
import { readText } from "../runtime/files.ts";
import { serveThread, type Transferable } from "../runtime/threads.ts";
import { maxInputCharsPerToken } from "./token_lengths.ts";
import { ModelTokenizer } from "./tokenizer.ts";

/** First message: which model to load; `measure` asks for the per-token character bound too. */
export interface TokenizerThreadInit {
  type: "init";
  dir: string;
  measure: boolean;
}

/** One unit of work. */
export type TokenizerThreadJob =
  | { type: "job"; id: number; op: "encode"; text: string; addSpecialTokens: boolean }
  | {
    type: "job";
    id: number;
    op: "chat";
    messages: ChatMessage[];
    /** How to render (generation prompt, continue_final_message, tools, template variables). */
    render: ChatRenderOptions;
    addSpecialTokens: boolean;
  }
  | { type: "job"; id: number; op: "decode"; ids: Int32Array };

/** Everything a thread sends back. */
export type TokenizerThreadReply =
  | { type: "ready"; maxInputCharsPerToken?: number }
  | { type: "init_failed"; message: string }
  | { type: "done"; id: number; ids?: Int32Array; text?: string }
  /** `template`: the chat template refused the messages (the request's fault); else our failure. */
  | { type: "failed"; id: number; kind: "template" | "internal"; message: string };

let tokenizer: ModelTokenizer | undefined;

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function runJob(job: TokenizerThreadJob, reply: (m: TokenizerThreadReply, transfer?: Transferable[]) => void): void {
  const tok = tokenizer!;
  if (job.op === "decode") {
    reply({ type: "done", id: job.id, text: tok.decode(Array.from(job.ids)) });
    return;
  }
  let text: string;
  if (job.op === "chat") {
    try {
      text = tok.applyChatTemplate(job.messages, job.render);
    } catch (e) {
      reply({ type: "failed", id: job.id, kind: "template", message: messageOf(e) });
      return;
    }
  } else {
    text = job.text;
  }
  const ids = Int32Array.from(tok.encode(text, { addSpecialTokens: job.addSpecialTokens }));
  reply({ type: "done", id: job.id, ids }, [ids.buffer as ArrayBuffer]);
}

serveThread((message, reply) => {
  const m = message as TokenizerThreadInit | TokenizerThreadJob;
  if (m.type === "init") {
    try {
      tokenizer = ModelTokenizer.fromDir(m.dir);
      const bound = m.measure ? maxInputCharsPerToken(JSON.parse(readText(join(m.dir, "tokenizer.json")))) : undefined;
      reply(
        {
          type: "ready",
          ...(bound !== undefined ? { maxInputCharsPerToken: bound } : {}),
        } satisfies TokenizerThreadReply,
      );
    } catch (e) {
      reply({ type: "init_failed", message: messageOf(e) } satisfies TokenizerThreadReply);
    }
    return;
  }
  try {
    runJob(m, reply);
  } catch (e) {
    reply({ type: "failed", id: m.id, kind: "internal", message: messageOf(e) } satisfies TokenizerThreadReply);
  }
});
