/**
 * The only dlopen in LMPool: opens a shared library with bun:ffi under Bun and Deno.dlopen under
 * Deno, from the one table in ffi/symbols.ts, and returns plain callable functions.
 * @module
 */
import type { NativeSignature, NativeType } from "./symbols.ts";

/** A native call as seen by TypeScript: numbers, bigints, typed arrays or null in, number/bigint out. */
export type NativeFunction = (...args: unknown[]) => number | bigint;

/** An opened library: its functions and a close(). */
export interface OpenedLibrary<K extends string> {
  readonly symbols: Record<K, NativeFunction>;
  close(): void;
}

const BUN_TYPES: Record<NativeType, string> = {
  i32: "i32",
  i64: "i64",
  u64: "u64",
  f32: "f32",
  buf: "ptr",
  void: "void",
};

const DENO_TYPES: Record<NativeType, string> = {
  i32: "i32",
  i64: "i64",
  u64: "u64",
  f32: "f32",
  buf: "buffer",
  void: "void",
};

interface DenoFfi {
  dlopen(path: string, symbols: Record<string, unknown>): {
    symbols: Record<string, NativeFunction>;
    close(): void;
  };
}

interface BunFfi {
  dlopen(path: string, symbols: Record<string, unknown>): {
    symbols: Record<string, NativeFunction>;
    close(): void;
  };
}

/** Opens `path` and binds every symbol of `table`; throws the loader's own error if it fails. */
export function openLibrary<K extends string>(
  path: string,
  table: Record<K, NativeSignature>,
): OpenedLibrary<K> {
  const g = globalThis as { Deno?: DenoFfi; Bun?: unknown };
  if (g.Deno) {
    const decl: Record<string, unknown> = {};
    for (const [name, sig] of Object.entries<NativeSignature>(table)) {
      decl[name] = { parameters: sig.args.map((t) => DENO_TYPES[t]), result: DENO_TYPES[sig.returns] };
    }
    const lib = g.Deno.dlopen(path, decl);
    return { symbols: lib.symbols as Record<K, NativeFunction>, close: () => lib.close() };
  }
  if (g.Bun) {
    // import.meta.require is Bun's synchronous loader; bun:ffi is only reachable there.
    const req = (import.meta as unknown as { require(id: string): unknown }).require;
    const ffi = req("bun:ffi") as BunFfi;
    const decl: Record<string, unknown> = {};
    for (const [name, sig] of Object.entries<NativeSignature>(table)) {
      decl[name] = { args: sig.args.map((t) => BUN_TYPES[t]), returns: BUN_TYPES[sig.returns] };
    }
    const lib = ffi.dlopen(path, decl);
    return { symbols: lib.symbols as Record<K, NativeFunction>, close: () => lib.close() };
  }
  throw new Error("LMPool's native library needs Bun or Deno (no FFI in this runtime)");
}
