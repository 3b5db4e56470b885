/**
 * F1: oversized input while the load runs. A 3 MB plain-text prompt and a 10 MB body, on
 * /v1/completions and on /tokenize: a completion of either gets a 4xx (413 or 400) with an OpenAI
 * error body, as does /tokenize of 10 MB; /tokenize of 3 MB (under the body limit) may answer with
 * its tokens, as vLLM's does. Every other request completes and no worker dies: tokenizing the big
 * prompt must not stall the launcher.
 * @module
 */
import type { FaultCase } from "../fault_case.ts";
import { checkLoadUnharmed, checkNoWorkerDied, workerBaseline } from "./worker_faults.ts";

const MB = 1024 * 1024;

/** A prompt of `bytes` bytes of plain words. */
function textOfBytes(bytes: number): string {
  return "lorem ipsum dolor sit amet ".repeat(Math.ceil(bytes / 27)).slice(0, bytes);
}

/** The F1 case. */
export const largeBodyCase: FaultCase = {
  name: "f1-large-body",
  description:
    "3 MB prompt and 10 MB body on /v1/completions and /tokenize under load: 4xx each, others complete, no worker dies",
  timeoutMs: (o) => (o.quick ? 90_000 : 180_000),
  async run(ctx) {
    const before = await workerBaseline(ctx);
    const model = ctx.server.modelName;
    const three = textOfBytes(3 * MB);
    const ten = textOfBytes(10 * MB);
    const sends = [
      {
        label: "f1:completions-3MB",
        path: "/v1/completions",
        body: { model, prompt: three, max_tokens: 4 },
        stream: false,
      },
      {
        label: "f1:completions-3MB-stream",
        path: "/v1/completions",
        body: { model, prompt: three, max_tokens: 4, stream: true },
        stream: true,
      },
      {
        label: "f1:completions-10MB",
        path: "/v1/completions",
        body: { model, prompt: ten, max_tokens: 4 },
        stream: false,
      },
      { label: "f1:tokenize-3MB", path: "/tokenize", body: { model, prompt: three }, stream: false },
      { label: "f1:tokenize-10MB", path: "/tokenize", body: { model, prompt: ten }, stream: false },
    ];
    const outcomes = await Promise.all(sends.map((s) => ctx.send({ ...s, deadlineMs: 60_000 })));
    for (const o of outcomes) {
      if (o.label === "f1:tokenize-3MB") {
        const answered = o.kind === "completed" || (o.kind === "clear_error" && (o.status === 413 || o.status === 400));
        ctx.check(
          `${o.label} answered (tokens) or refused with 413/400`,
          answered,
          `${o.kind}, HTTP ${o.status}: ${o.detail.slice(0, 160)}`,
        );
        continue;
      }
      const refused = o.kind === "clear_error" && (o.status === 413 || o.status === 400);
      ctx.check(`${o.label} refused with 413/400`, refused, `${o.kind}, HTTP ${o.status}: ${o.detail.slice(0, 160)}`);
    }
    // Let the load run past the refusals: a stalled launcher shows as deaths a few seconds later.
    await ctx.sleep(ctx.options.quick ? 3000 : 8000);
    await checkNoWorkerDied(ctx, before);
    checkLoadUnharmed(ctx);
  },
};
