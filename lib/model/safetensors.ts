/**
 * safetensors reader: an 8-byte little-endian header length, a JSON header (tensor name ->
 * dtype, shape, data_offsets relative to the end of the header, plus optional __metadata__),
 * then the raw little-endian tensor bytes. Tensors are returned as views into the file's bytes
 * (memory-mapped under Bun), never copied.
 * @module
 */
import { ModelFormatError } from "../core/errors.ts";
import { mapFile } from "../runtime/mmap.ts";

/** Bytes per element of every dtype the safetensors format defines. */
export const SAFETENSORS_DTYPE_BYTES: Readonly<Record<string, number>> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  I16: 2,
  U16: 2,
  F16: 2,
  BF16: 2,
  I32: 4,
  U32: 4,
  F32: 4,
  I64: 8,
  U64: 8,
  F64: 8,
};

/** One tensor of a safetensors file. `bytes` views the file's data; it is not a copy. */
export interface SafetensorsTensor {
  readonly name: string;
  /** safetensors dtype name, e.g. "BF16". */
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly numel: number;
  readonly bytes: Uint8Array;
}

/** A parsed safetensors file. */
export interface SafetensorsFile {
  /** Where the bytes came from (for error messages). */
  readonly source: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly tensors: ReadonlyMap<string, SafetensorsTensor>;
}

// Real headers are a few hundred KB at most; a huge length means a corrupt or foreign file.
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

/** Parses the header of `bytes` (a whole safetensors file) and returns views of its tensors. */
export function parseSafetensors(bytes: Uint8Array, source = "<bytes>"): SafetensorsFile {
  const fail = (what: string): never => {
    throw new ModelFormatError(`${source}: ${what}`);
  };
  if (bytes.byteLength < 8) fail(`file is ${bytes.byteLength} bytes, too short for a safetensors header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, 8);
  const headerLen = Number(view.getBigUint64(0, true));
  if (headerLen > MAX_HEADER_BYTES || 8 + headerLen > bytes.byteLength) {
    fail(`header length ${headerLen} does not fit the file's ${bytes.byteLength} bytes`);
  }
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLen)));
  } catch (e) {
    fail(`header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof header !== "object" || header === null || Array.isArray(header)) fail("header is not a JSON object");
  const dataStart = 8 + headerLen;
  const dataLen = bytes.byteLength - dataStart;
  let metadata: Record<string, string> = {};
  const tensors = new Map<string, SafetensorsTensor>();
  for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      metadata = (entry ?? {}) as Record<string, string>;
      continue;
    }
    const t = parseEntry(name, entry, dataLen, fail);
    tensors.set(name, { ...t, bytes: bytes.subarray(dataStart + t.begin, dataStart + t.end) });
  }
  return { source, metadata, tensors };
}

function parseEntry(
  name: string,
  entry: unknown,
  dataLen: number,
  fail: (what: string) => never,
): { name: string; dtype: string; shape: number[]; numel: number; begin: number; end: number } {
  const e = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown } | null;
  if (typeof e !== "object" || e === null) return fail(`tensor ${name}: entry is not an object`);
  const dtype = e.dtype;
  if (typeof dtype !== "string" || !(dtype in SAFETENSORS_DTYPE_BYTES)) {
    return fail(`tensor ${name}: unknown dtype ${JSON.stringify(dtype)}`);
  }
  const shape = e.shape;
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    return fail(`tensor ${name}: shape ${JSON.stringify(shape)} is not a list of non-negative integers`);
  }
  const offsets = e.data_offsets;
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0)) {
    return fail(`tensor ${name}: data_offsets ${JSON.stringify(offsets)} is not [begin, end]`);
  }
  const [begin, end] = offsets as [number, number];
  const numel = (shape as number[]).reduce((a, b) => a * b, 1);
  const expected = numel * SAFETENSORS_DTYPE_BYTES[dtype]!;
  if (end < begin || end - begin !== expected) {
    return fail(
      `tensor ${name}: data_offsets [${begin}, ${end}] span ${end - begin} bytes, ` +
        `but ${dtype}${JSON.stringify(shape)} needs ${expected}`,
    );
  }
  if (end > dataLen) return fail(`tensor ${name}: data_offsets end ${end} is past the data's ${dataLen} bytes`);
  return { name, dtype, shape: shape as number[], numel, begin, end };
}

/** Maps (or reads, outside Bun) the file at `path` and parses it. */
export function openSafetensors(path: string): SafetensorsFile {
  return parseSafetensors(mapFile(path), path);
}
