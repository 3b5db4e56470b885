/**
 * The only dlopen in LMPool: opens a shared library with bun:ffi under Bun and Deno.dlopen under
 * Deno, from a symbol table (ffi/symbols.ts for LMPool's own library, ffi/zmq/libzmq.ts for
 * libzmq), and returns plain callable functions; the one way to take a typed array's address for a
 * pointer field of a struct (ffi/step_batch.ts); and the one way to copy native memory out.
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
  UnsafePointer: {
    of(view: ArrayBufferView): unknown;
    value(pointer: unknown): number | bigint;
    create(address: bigint): unknown;
  };
  UnsafePointerView: { copyInto(pointer: unknown, destination: Uint8Array): void };
}

interface BunFfi {
  dlopen(path: string, symbols: Record<string, unknown>): {
    symbols: Record<string, NativeFunction>;
    close(): void;
  };
  ptr(view: ArrayBufferView): number;
  toArrayBuffer(address: number, byteOffset: number, byteLength: number): ArrayBuffer;
}

let bunFfi: BunFfi | null = null;

/** bun:ffi, loaded once (import.meta.require is Bun's synchronous loader; bun:ffi is only reachable there). */
function loadBunFfi(): BunFfi {
  bunFfi ??= (import.meta as unknown as { require(id: string): unknown }).require("bun:ffi") as BunFfi;
  return bunFfi;
}

/**
 * The address of `view`'s first element, for a pointer field of a struct handed to native code; 0n
 * (NULL) for an empty view. The caller keeps the view alive for as long as native code may use it.
 */
export function addressOf(view: ArrayBufferView): bigint {
  if (view.byteLength === 0) return 0n;
  // A small typed array may keep its elements inside the engine's object until something asks for
  // its buffer, and then moves them out: asking first fixes where they live, so an address taken
  // now stays valid for a launched step whose outputs land later.
  void view.buffer;
  const g = globalThis as { Deno?: DenoFfi; Bun?: unknown };
  if (g.Deno) return BigInt(g.Deno.UnsafePointer.value(g.Deno.UnsafePointer.of(view)));
  if (g.Bun) return BigInt(loadBunFfi().ptr(view));
  throw new Error("LMPool's native library needs Bun or Deno (no FFI in this runtime)");
}

/**
 * A copy of `length` bytes at native address `address` (memory a native call handed back, such as
 * a received ZeroMQ message's data), taken before that memory is released.
 */
export function copyFromAddress(address: bigint, length: number): Uint8Array {
  const out = new Uint8Array(length);
  if (length === 0) return out;
  const g = globalThis as { Deno?: DenoFfi; Bun?: unknown };
  if (g.Deno) {
    g.Deno.UnsafePointerView.copyInto(g.Deno.UnsafePointer.create(address), out);
    return out;
  }
  if (g.Bun) {
    out.set(new Uint8Array(loadBunFfi().toArrayBuffer(Number(address), 0, length)));
    return out;
  }
  throw new Error("LMPool's native calls need Bun or Deno (no FFI in this runtime)");
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
    const ffi = loadBunFfi();
    const decl: Record<string, unknown> = {};
    for (const [name, sig] of Object.entries<NativeSignature>(table)) {
      decl[name] = { args: sig.args.map((t) => BUN_TYPES[t]), returns: BUN_TYPES[sig.returns] };
    }
    const lib = ffi.dlopen(path, decl);
    return { symbols: lib.symbols as Record<K, NativeFunction>, close: () => lib.close() };
  }
  throw new Error("LMPool's native library needs Bun or Deno (no FFI in this runtime)");
}
