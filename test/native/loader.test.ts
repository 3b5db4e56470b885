// The loader's choice rules and its error when nothing can be opened.
import { expect, test } from "bun:test";
import { loadLibrary } from "../../ffi/loader.ts";
import { Native } from "../../ffi/native.ts";
import { NativeLibraryNotFoundError } from "../../lib/core/errors.ts";

test("a missing library lists every path tried and says make native", () => {
  let err: unknown;
  try {
    loadLibrary({ path: "/nonexistent/liblmpool_cpu.so" });
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(NativeLibraryNotFoundError);
  const e = err as NativeLibraryNotFoundError;
  expect(e.tried).toEqual(["/nonexistent/liblmpool_cpu.so"]);
  expect(e.message).toContain("/nonexistent/liblmpool_cpu.so: not found");
  expect(e.message).toContain("make native");
});

test("an unknown backend name is a RangeError naming it", () => {
  expect(() => loadLibrary({ backend: "tpu" as "cpu" })).toThrow(/"tpu"/);
});

test("the CPU backend can be forced and reports its ABI", () => {
  const n = new Native({ backend: "cpu" });
  expect(n.backend).toBe("cpu");
  expect(n.abiVersion()).toBe(1);
  expect(n.deviceCount()).toBe(1);
  const mem = n.deviceMemory();
  expect(mem.total).toBeGreaterThan(0);
  expect(mem.free).toBeLessThanOrEqual(mem.total);
  expect(() => n.setDevice(3)).toThrow(/device 3/);
  n.close();
});
