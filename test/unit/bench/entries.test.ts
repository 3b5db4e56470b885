// The `bun bench` entry list: entries load, and a missing or malformed one is "not available".
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { BENCH_ENTRY_MODULES, loadEntry } from "../../../bench/entries.ts";

test("a module that does not exist yet is listed as not available", async () => {
  const e = await loadEntry({ name: "later", module: "./later_entry_that_does_not_exist.ts" });
  expect("unavailable" in e && e.unavailable).toBe(
    "not available: bench/later_entry_that_does_not_exist.ts not built yet",
  );
});

test("a module without a default BenchEntry is not available, with the reason", async () => {
  const e = await loadEntry({ name: "profile-lib", module: "./trace_profile.ts" });
  expect("unavailable" in e && e.unavailable).toContain("has no default-exported BenchEntry");
});

test("every listed entry loads with its own name", async () => {
  for (const ref of BENCH_ENTRY_MODULES) {
    const e = await loadEntry(ref);
    expect("entry" in e ? e.entry.name : e.unavailable).toBe(ref.name);
  }
});

test("`bun bench` lists every entry, and an unknown name exits 2", () => {
  const main = fileURLToPath(new URL("../../../bench/main.ts", import.meta.url));
  const list = spawnSync(process.execPath, ["run", main], { encoding: "utf8" });
  expect(list.status).toBe(0);
  for (const m of BENCH_ENTRY_MODULES) expect(list.stdout).toMatch(new RegExp(`^  ${m.name} `, "m"));
  const bad = spawnSync(process.execPath, ["run", main, "nope"], { encoding: "utf8" });
  expect(bad.status).toBe(2);
  expect(bad.stderr).toContain('unknown benchmark entry "nope"');
});

test("the e2e comparison covers every routing policy the control plane offers", async () => {
  const { POLICY_NAMES } = await import("../../../lib/global/routing_config.ts");
  const { MULTI_GPU_SETTINGS } = await import("../../../bench/configurations.ts");
  const offPolicies = Object.values(MULTI_GPU_SETTINGS).filter((s) => !s.transfer.foreground && !s.transfer.background)
    .map((s) => s.policy);
  expect([...offPolicies].sort()).toEqual([...POLICY_NAMES].sort());
});

test("e2e --workload-options and --transfer-options must be JSON objects; the error names the option", async () => {
  const { runE2E } = await import("../../../bench/e2e.ts");
  await expect(runE2E(["--quick", "--transfer-options", "{oops"], () => {})).rejects.toThrow(
    /--transfer-options must be a JSON object, got "\{oops"/,
  );
  await expect(runE2E(["--quick", "--transfer-options", "[1]"], () => {})).rejects.toThrow(
    /--transfer-options must be a JSON object, got "\[1\]"/,
  );
  await expect(runE2E(["--quick", "--workload-options", "3"], () => {})).rejects.toThrow(
    /--workload-options must be a JSON object, got "3"/,
  );
});
