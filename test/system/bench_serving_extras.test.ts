// `bun bench serving --quick --extras KIND` end to end: a real HTTP server on the CPU backend with
// the tiny model, a share of the requests carrying top logprobs or a structured output (sent with
// ignore_eos, as the random-256 workload sends its requests). The report splits TPOT and TTFT by
// group, every structured output is checked against its zod schema, and the grammar ends each one
// before the length limit; with structured outputs the report has the server's per-step mask time.
import { expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runServing } from "../../bench/serving.ts";
import { EXTRA_KINDS } from "../../bench/driver/request_extras.ts";

setDefaultTimeout(120_000);

for (const kind of EXTRA_KINDS) {
  test(`--extras ${kind}: both groups reported, every extra output finished as asked`, async () => {
    const out = mkdtempSync(join(tmpdir(), "lmpool-serving-extras-"));
    const text = await runServing(["--quick", "--extras", kind, "--extras-share", "0.5", "--out", out], () => {});
    const saved = JSON.parse(readFileSync(join(out, "serving.json"), "utf8"));
    const extras = saved.extras;
    expect(extras.kind).toBe(kind);
    expect(extras.requests).toBeGreaterThan(0);
    expect(extras.finished).toBe(extras.requests);
    expect(extras.invalid).toBe(0);
    expect(extras.checked).toBe(kind !== "logprobs");
    // The quick workload caps outputs at 8 tokens: only the structured outputs (capped by the
    // extra itself) must end before their limit.
    if (kind !== "logprobs") expect(extras.lengthFinishes).toBe(0);
    expect(Object.keys(saved.metrics.phases).sort()).toEqual([kind, "plain"].sort());
    expect(saved.metrics.phases[kind].requests).toBe(extras.requests);
    expect(text).toContain(`| ${kind} | ${extras.requests} |`);
    // Structured outputs: the server's per-step mask times over the run (from /metrics).
    if (kind !== "logprobs") {
      expect(extras.masks.steps).toBeGreaterThan(0);
      expect(extras.masks.meanMs).toBeGreaterThan(0);
      expect(text).toMatch(/structured-output masks: \d+ steps with constrained requests, mask time per step mean/);
    } else expect(extras.masks).toBeUndefined();
  });
}

test("--extras refuses an unknown kind by name, and --extras-share needs --extras", async () => {
  await expect(runServing(["--quick", "--extras", "beam"], () => {})).rejects.toThrow(/--extras must be one of/);
  await expect(runServing(["--quick", "--extras-share", "0.5"], () => {})).rejects.toThrow(/--extras-share needs/);
  await expect(runServing(["--workload", "memory-skew", "--extras", "logprobs"], () => {})).rejects
    .toThrow(/has phases of its own/);
  await expect(runServing(["--quick", "--extras", "logprobs", "--extras-share", "2"], () => {})).rejects.toThrow(
    /--extras-share must be in \(0, 1\], got 2/,
  );
});
