/**
 * `bun bench profile`: the trace profile of every built-in workload (and of a JSONL trace with
 * --workload-file): request share and token share a perfect, unlimited cache could reuse.
 * @module
 */
import { parseArgs } from "node:util";
import type { BenchEntry } from "./entry.ts";
import { formatPercent as pct, formatShare, markdownTable } from "./report/summary_md.ts";
import { profileTrace } from "./trace_profile.ts";
import { readJsonlWorkload } from "./workloads/jsonl.ts";
import { buildWorkload } from "./workloads/registry.ts";
import type { Workload } from "./workloads/types.ts";

/** Profile rows of the built-in workloads (plus `extra`). */
export function profileRows(seed: number, extra: Workload[] = []): string[][] {
  const workloads = [1, 3, 5].map((scale) => buildWorkload({ name: "locality", scale, seed }));
  for (const name of ["load-skew", "memory-skew", "shared-prefix", "random", "multi-turn"]) {
    workloads.push(buildWorkload({ name, seed }));
  }
  return [...workloads, ...extra].map((w) => {
    const blockSize = w.settings.blockSize ?? 256;
    const p = profileTrace(w.requests, blockSize);
    const ref = w.reference;
    return [
      w.name,
      String(p.requests),
      String(p.promptTokens),
      String(blockSize),
      pct(p.requestShare),
      pct(p.tokenShare),
      ref ? pct(ref.requestShare) : "—",
      ref ? formatShare(ref.tokenShare) : "—",
    ];
  });
}

const entry: BenchEntry = {
  name: "profile",
  description: "trace profile (request/token prefix share under ordered replay, unlimited cache) of every workload",
  async run(argv) {
    const { values } = parseArgs({
      args: argv,
      options: { quick: { type: "boolean" }, seed: { type: "string" }, "workload-file": { type: "string" } },
      strict: true,
    });
    const seed = values.seed === undefined ? 0 : Number(values.seed);
    if (!Number.isSafeInteger(seed)) {
      throw new RangeError(`--seed must be an integer, got ${JSON.stringify(values.seed)}`);
    }
    const extra = values["workload-file"] ? [readJsonlWorkload(values["workload-file"])] : [];
    console.log(
      markdownTable([
        "workload",
        "requests",
        "prompt tokens",
        "block",
        "request share",
        "token share",
        "reference req",
        "reference tok",
      ], profileRows(seed, extra)),
    );
  },
};
export default entry;
