/**
 * F2: sampling values out of float32 range or past what a float32 can tell from zero, co-batched
 * with the load (streamed and not): each bad request gets a 400 with an OpenAI error body, the
 * normal requests beside it complete, no worker dies.
 * @module
 */
import { completionBody } from "../load.ts";
import type { FaultCase } from "../fault_case.ts";
import { checkLoadUnharmed, checkNoWorkerDied, workerBaseline } from "./worker_faults.ts";

/** The bad fields: each is finite as a float64 but not a valid float32 value in its range. */
const BAD_SAMPLING_FIELDS: readonly Record<string, number>[] = [
  { temperature: 1e308 },
  { temperature: 3.5e38 },
  { top_p: 1e-50 },
  { presence_penalty: 1e308 },
  { frequency_penalty: -1e308 },
];

/** The F2 case. */
export const badFloatsCase: FaultCase = {
  name: "f2-bad-floats",
  description:
    "temperature 1e308 and other out-of-float32 sampling values co-batched with normal requests: 400 each, others complete",
  timeoutMs: (o) => (o.quick ? 60_000 : 120_000),
  async run(ctx) {
    const before = await workerBaseline(ctx);
    const rounds = ctx.options.quick ? 1 : 3;
    for (let round = 0; round < rounds; round++) {
      const sends = BAD_SAMPLING_FIELDS.flatMap((field) =>
        [false, true].map((stream) => {
          const name = Object.entries(field).map(([k, v]) => `${k}=${v}`).join(",");
          return ctx.send({
            label: `f2:${name}${stream ? ":stream" : ""}`,
            path: "/v1/completions",
            stream,
            deadlineMs: 30_000,
            body: completionBody(ctx.server.modelName, "co-batched with the load", 8, stream, field),
          });
        })
      );
      for (const o of await Promise.all(sends)) {
        ctx.check(
          `${o.label} refused with 400`,
          o.kind === "clear_error" && o.status === 400,
          `${o.kind}, HTTP ${o.status}: ${o.detail.slice(0, 160)}`,
        );
      }
    }
    await ctx.sleep(ctx.options.quick ? 2000 : 5000);
    await checkNoWorkerDied(ctx, before);
    checkLoadUnharmed(ctx);
  },
};
