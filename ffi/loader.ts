/**
 * Finds and opens LMPool's native library. Choice: LMPOOL_LIB=path, else LMPOOL_BACKEND=cpu|cuda,
 * else CUDA when it loads and sees a GPU, else CPU.
 * @module
 */
import { NativeLibraryNotFoundError } from "../lib/core/errors.ts";
import { checkNativeSettings, readSetting } from "../lib/runtime/env.ts";
import { pathExists } from "../lib/runtime/files.ts";
import { type OpenedLibrary, openLibrary } from "./dlopen.ts";
import { ABI_VERSION, type SymbolName, SYMBOLS } from "./symbols.ts";

/** The backends the native library is built for. */
export type BackendKind = "cpu" | "cuda";

/** A library opened from `path`, of the given backend. */
export interface LoadedLibrary {
  readonly path: string;
  readonly backend: BackendKind;
  readonly lib: OpenedLibrary<SymbolName>;
}

const BUILD_DIR = new URL("../build/", import.meta.url).pathname;

function candidates(backend: BackendKind): string[] {
  const file = `liblmpool_${backend}.so`;
  const out = [BUILD_DIR + file];
  const extra = readSetting("LMPOOL_LIB_DIR");
  if (extra) out.unshift(`${extra}/${file}`);
  return out;
}

function tryOpen(path: string, tried: string[], errors: string[]): OpenedLibrary<SymbolName> | null {
  tried.push(path);
  if (!pathExists(path)) {
    errors.push(`${path}: not found`);
    return null;
  }
  let lib: OpenedLibrary<SymbolName>;
  try {
    lib = openLibrary(path, SYMBOLS);
  } catch (e) {
    errors.push(`${path}: ${(e as Error).message}`);
    return null;
  }
  // Same names with other arguments would be called wrongly, not refused: a stale build stops here.
  const abi = Number(lib.symbols.lp_abi_version());
  if (abi !== ABI_VERSION) {
    errors.push(`${path}: built for ABI version ${abi}, this code needs ${ABI_VERSION}`);
    lib.close();
    return null;
  }
  return lib;
}

function countDevices(lib: OpenedLibrary<SymbolName>): number {
  const out = new Int32Array(1);
  return lib.symbols.lp_device_count(out) === 0 ? (out[0] ?? 0) : 0;
}

function notFound(what: string, tried: string[], errors: string[]): NativeLibraryNotFoundError {
  return new NativeLibraryNotFoundError(
    `${what}; tried:\n  ${errors.join("\n  ")}\nRun \`make native\` to build it.`,
    tried,
  );
}

/** Opens the native library according to the environment (see module doc). */
export function loadLibrary(request: { backend?: BackendKind; path?: string } = {}): LoadedLibrary {
  const tried: string[] = [];
  const errors: string[] = [];
  checkNativeSettings();
  const explicitPath = request.path ?? readSetting("LMPOOL_LIB");
  const wanted = request.backend ?? readSetting("LMPOOL_BACKEND");
  if (wanted !== undefined && wanted !== "cpu" && wanted !== "cuda") {
    throw new RangeError(`backend must be "cpu" or "cuda", got ${JSON.stringify(wanted)}`);
  }
  if (explicitPath) {
    const lib = tryOpen(explicitPath, tried, errors);
    if (!lib) throw notFound(`cannot open the native library at LMPOOL_LIB=${explicitPath}`, tried, errors);
    return { path: explicitPath, backend: lib.symbols.lp_backend_kind() === 1 ? "cuda" : "cpu", lib };
  }
  const order: BackendKind[] = wanted ? [wanted] : ["cuda", "cpu"];
  for (const backend of order) {
    for (const path of candidates(backend)) {
      const lib = tryOpen(path, tried, errors);
      if (!lib) continue;
      // Default choice: CUDA only when it also sees a device.
      if (backend === "cuda" && !wanted && countDevices(lib) === 0) {
        errors.push(`${path}: loaded, but no CUDA device is visible`);
        lib.close();
        continue;
      }
      return { path, backend, lib };
    }
  }
  throw notFound(`no usable LMPool native library (${wanted ?? "cuda or cpu"})`, tried, errors);
}
