// Deno smoke suite: the native entry (ffi/mod.ts) imports under Deno and one FFI call works through Deno.dlopen.
import { Native } from "../../ffi/mod.ts";
import { ABI_VERSION } from "../../ffi/symbols.ts";
import * as lmpool from "../../mod.ts";

Deno.test("mod.ts imports under Deno", () => {
  if (
    typeof lmpool.LLM !== "function" || typeof lmpool.LLMEngine !== "function" || typeof lmpool.serve !== "function"
  ) throw new Error("mod.ts lacks LLM, LLMEngine or serve");
});

Deno.test("lmpool/native loads the native library under Deno and runs RMSNorm", () => {
  const n = new Native({ backend: "cpu" });
  if (n.abiVersion() !== ABI_VERSION) throw new Error(`ABI version ${n.abiVersion()}, expected ${ABI_VERSION}`);
  // x = [1, -1, 1, -1] (bf16 0x3f80 / 0xbf80), w = 1: RMSNorm keeps the values.
  const x = new Uint16Array([0x3f80, 0xbf80, 0x3f80, 0xbf80]);
  const w = new Uint16Array([0x3f80, 0x3f80, 0x3f80, 0x3f80]);
  const out = n.rmsnormBf16(x, w, 1, 4, 0);
  if (out.join() !== x.join()) throw new Error(`RMSNorm under Deno gave ${out.join()}, expected ${x.join()}`);
  n.close();
});
