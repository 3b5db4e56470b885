// The library's exported surface is exactly lmpool.h: its dynamic symbol table holds the functions
// the header marks LP_API and nothing else (internal helpers stay hidden), ffi/symbols.ts binds
// every one of them, and the lp_step_batch layout ffi/step_batch.ts packs is the one this build's
// compiler laid out. Runs against whichever library loads (CPU in CI, CUDA on the GPU machine).
import { expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { native } from "../../ffi/native.ts";
import { STEP_BATCH_BYTES, stepBatchLayout } from "../../ffi/step_batch.ts";
import { SYMBOLS } from "../../ffi/symbols.ts";

const HEADER = new URL("../../csrc/include/lmpool.h", import.meta.url).pathname;

/** Names of the functions lmpool.h declares with LP_API. */
function declaredFunctions(): string[] {
  const text = readFileSync(HEADER, "utf8");
  return [...text.matchAll(/^LP_API\s+[\w\s*]+?\b(lp_\w+)\s*\(/gm)].map((m) => m[1]!).sort();
}

/** Names in the library's dynamic symbol table that it defines (nm -D --defined-only). */
function exportedSymbols(path: string): string[] {
  const out = execFileSync("nm", ["-D", "--defined-only", path], { encoding: "utf8" });
  return out
    .split("\n")
    .map((line) => line.trim().split(/\s+/).at(-1) ?? "")
    .filter((name) => name !== "")
    .sort();
}

test("lmpool.h declares every function with LP_API (none left unmarked)", () => {
  const text = readFileSync(HEADER, "utf8");
  const unmarked = [...text.matchAll(/^(?!LP_API)[\w ]*?\b(lp_status|int32_t)\s+(lp_\w+)\s*\(/gm)].map((m) => m[2]);
  expect(unmarked).toEqual([]);
  expect(declaredFunctions().length).toBeGreaterThan(40);
});

test(`the ${native().backend} library exports exactly lmpool.h's functions`, () => {
  expect(exportedSymbols(native().path)).toEqual(declaredFunctions());
});

test("ffi/symbols.ts binds every function of lmpool.h and no other", () => {
  expect(Object.keys(SYMBOLS).sort()).toEqual(declaredFunctions());
});

test(`lp_step_batch as packed in TypeScript is lp_step_batch as compiled (${native().backend} backend)`, () => {
  const compiled = native().stepBatchLayout();
  expect(compiled).toBe(stepBatchLayout());
  expect(compiled.startsWith(`size=${STEP_BATCH_BYTES} `)).toBe(true);
});
