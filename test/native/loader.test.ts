// The loader's choice rules, its error when nothing can be opened, and its refusal of a stale build.
import { expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadLibrary } from "../../ffi/loader.ts";
import { Native } from "../../ffi/native.ts";
import { ABI_VERSION, SYMBOLS } from "../../ffi/symbols.ts";
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
  expect(n.abiVersion()).toBe(ABI_VERSION);
  expect(n.deviceCount()).toBe(1);
  const mem = n.deviceMemory();
  expect(mem.total).toBeGreaterThan(0);
  expect(mem.free).toBeLessThanOrEqual(mem.total);
  expect(() => n.setDevice(3)).toThrow(/device 3/);
  n.close();
});

test("a library built for another ABI version is refused, naming both versions", () => {
  // A stand-in with every symbol the table binds (so only the version can stop it), reporting ABI 1.
  const dir = mkdtempSync(join(tmpdir(), "lmpool-abi-"));
  try {
    const stubs = Object.keys(SYMBOLS).map((name) =>
      name === "lp_abi_version" ? "int lp_abi_version(void) { return 1; }" : `int ${name}(void) { return 0; }`
    );
    writeFileSync(join(dir, "old.c"), stubs.join("\n") + "\n");
    execFileSync("cc", ["-shared", "-fPIC", "-o", join(dir, "liblmpool_cpu.so"), join(dir, "old.c")]);
    let err: unknown;
    try {
      loadLibrary({ path: join(dir, "liblmpool_cpu.so") });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(NativeLibraryNotFoundError);
    expect((err as Error).message).toContain(`built for ABI version 1, this code needs ${ABI_VERSION}`);
    expect((err as Error).message).toContain("make native");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
