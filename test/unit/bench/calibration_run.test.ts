// `bun bench calibrate --quick` end to end on the CPU backend, as a subprocess: it sweeps the tiny
// model, measures the host overhead through the in-process engine, fits, and writes a profile the
// simulator's parser accepts and a sweep that `--from` refits. `bun bench native_step --sweep`
// writes the same sweep format, and bad flags fail with the flag's name.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadEngineProfile } from "../../../bench/calibration/engine_profile.ts";
import { parseSweepFile } from "../../../bench/calibration/sweep_file.ts";
import { tinyModelDir } from "../../helpers/tiny_model_dir.ts";

const MAIN = fileURLToPath(new URL("../../../bench/main.ts", import.meta.url));

function bench(...args: string[]) {
  const r = spawnSync(process.execPath, ["run", MAIN, ...args], { encoding: "utf8", timeout: 120_000 });
  return { status: r.status, out: `${r.stdout}\n${r.stderr}` };
}

test("calibrate --quick sweeps, measures the host overhead, fits and writes a loadable profile and sweep", async () => {
  const dir = mkdtempSync(join(tmpdir(), "lmpool-calibrate-"));
  const out = join(dir, "profile.json");
  const r = bench("calibrate", "--quick", "--model", await tinyModelDir(), "--out", out);
  expect(r.status, r.out).toBe(0);
  expect(r.out).toMatch(/host overhead: [\d.]+ ms per step/);
  expect(r.out).toMatch(/\d+ points: mean \|error\| [\d.]+%, max \|error\| [\d.]+%/);
  expect(r.out).toMatch(/points in [\d.]+ s of sweep wall time/);
  const profile = loadEngineProfile(out);
  expect(profile.backend).toBe("cpu");
  expect(profile.hostOverheadSource).toContain("measured through the in-process engine");
  expect(profile.fit.points.length).toBeGreaterThan(20);
  expect(new Set(profile.fit.points.map((p) => p.kind))).toEqual(new Set(["decode", "prefill", "mixed"]));
  // Every measured point is in the table with its prediction.
  for (const p of profile.fit.points) expect(r.out).toContain(p.label);

  const sweepPath = join(dir, "profile.sweep.json");
  const sweep = parseSweepFile(JSON.parse(readFileSync(sweepPath, "utf8")), sweepPath);
  expect(sweep.hostOverhead?.steps).toBeGreaterThan(0);
  expect(sweep.points.length).toBe(profile.fit.points.length);

  // Refit the saved points with a host overhead set by hand: same coefficients, the new overhead.
  const refit = join(dir, "refit.json");
  const r2 = bench("calibrate", "--from", sweepPath, "--host-overhead-ms", "0.25", "--out", refit);
  expect(r2.status, r2.out).toBe(0);
  const p2 = loadEngineProfile(refit);
  expect(p2.hostOverheadMs).toBe(0.25);
  expect(p2.hostOverheadSource).toBe("set by --host-overhead-ms");
  expect(p2.source).toContain(`refit by bun bench calibrate --from ${sweepPath}`);
  expect(p2.coefficients).toEqual(profile.coefficients);
}, 240_000);

test("native_step --sweep writes a sweep of the chosen kinds; calibrate --from it needs a host overhead", () => {
  const dir = mkdtempSync(join(tmpdir(), "lmpool-sweep-"));
  const out = join(dir, "sweep.json");
  const r = bench("native_step", "--quick", "--sweep", "prefill,decode", "--out", out);
  expect(r.status, r.out).toBe(0);
  const sweep = parseSweepFile(JSON.parse(readFileSync(out, "utf8")), out);
  expect(new Set(sweep.points.map((p) => p.kind))).toEqual(new Set(["decode", "prefill"]));
  expect(sweep.hostOverhead).toBeUndefined();
  for (const p of sweep.points) {
    expect(p.ms).toBeGreaterThan(0);
    if (p.kind === "decode") expect(p.work.decodeContext).toBe(p.batch * p.context);
    else expect(p.work.prefillTokens).toBe(p.seqs * p.chunk);
  }
  const r2 = bench("calibrate", "--from", out, "--out", join(dir, "p.json"));
  expect(r2.status).toBe(2);
  expect(r2.out).toContain("no host overhead measurement; pass --host-overhead-ms");
}, 120_000);

test("bad flags fail with the flag and the value", () => {
  const sweep = bench("native_step", "--quick", "--sweep", "decode,bogus");
  expect(sweep.status).toBe(2);
  expect(sweep.out).toContain('--sweep takes a comma-separated subset of decode,mixed,prefill, got "decode,bogus"');
  const both = bench("native_step", "--sweep", "decode", "--batches", "1,2");
  expect(both.out).toContain("--batches does not apply to --sweep");
  const host = bench("calibrate", "--quick", "--host-overhead-ms=-1");
  expect(host.out).toContain('--host-overhead-ms must be a number >= 0, got "-1"');
  const from = bench("calibrate", "--from", "x.json", "--model", "tiny");
  expect(from.out).toContain("--model does not apply to --from");
});
