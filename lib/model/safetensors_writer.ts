/**
 * safetensors writer that streams: each tensor's bytes are produced in chunks while the file is
 * written, so a multi-GB shard never sits in memory. The header is padded with spaces to a
 * multiple of 8 bytes (as the reference implementation does) so data starts aligned.
 * @module
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { makeDir } from "../runtime/files.ts";
import { SAFETENSORS_DTYPE_BYTES } from "./safetensors.ts";

/** A tensor to write: either its bytes, or a producer that emits them in order, in chunks. */
export interface TensorSource {
  readonly name: string;
  /** safetensors dtype name, e.g. "BF16". */
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly data: Uint8Array | ((emit: (chunk: Uint8Array) => void) => void);
}

/** Bytes of a tensor's data. */
export function tensorByteLength(t: Pick<TensorSource, "name" | "dtype" | "shape">): number {
  const size = SAFETENSORS_DTYPE_BYTES[t.dtype];
  if (size === undefined) {
    throw new RangeError(`tensor ${t.name}: unknown safetensors dtype ${JSON.stringify(t.dtype)}`);
  }
  return t.shape.reduce((a, b) => a * b, 1) * size;
}

/** The file's header bytes (length prefix + padded JSON) for tensors laid out in the given order. */
export function encodeSafetensorsHeader(
  tensors: readonly Pick<TensorSource, "name" | "dtype" | "shape">[],
  metadata: Readonly<Record<string, string>> = { format: "pt" },
): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    if (t.name === "__metadata__" || t.name in header) {
      throw new RangeError(`duplicate or reserved tensor name ${JSON.stringify(t.name)}`);
    }
    const len = tensorByteLength(t);
    header[t.name] = { dtype: t.dtype, shape: [...t.shape], data_offsets: [offset, offset + len] };
    offset += len;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.byteLength / 8) * 8;
  if (padded !== json.byteLength) {
    const p = new Uint8Array(padded).fill(0x20);
    p.set(json);
    json = p;
  }
  const out = new Uint8Array(8 + json.byteLength);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.byteLength), true);
  out.set(json, 8);
  return out;
}

/**
 * Writes a safetensors file at `path` (parent directories created). `onTensor` is called after
 * each tensor with its name and byte count. Throws if a producer emits the wrong number of bytes.
 */
export function writeSafetensorsFile(
  path: string,
  tensors: readonly TensorSource[],
  options: { metadata?: Record<string, string>; onTensor?: (name: string, bytes: number) => void } = {},
): void {
  makeDir(dirname(path));
  const fd = openSync(path, "w");
  try {
    writeAll(fd, encodeSafetensorsHeader(tensors, options.metadata));
    for (const t of tensors) {
      const expected = tensorByteLength(t);
      let written = 0;
      const emit = (chunk: Uint8Array): void => {
        written += chunk.byteLength;
        if (written > expected) throw new RangeError(`tensor ${t.name}: producer emitted more than ${expected} bytes`);
        writeAll(fd, chunk);
      };
      if (typeof t.data === "function") t.data(emit);
      else emit(t.data);
      if (written !== expected) throw new RangeError(`tensor ${t.name}: got ${written} bytes, expected ${expected}`);
      options.onTensor?.(t.name, written);
    }
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, bytes: Uint8Array): void {
  let done = 0;
  while (done < bytes.byteLength) done += writeSync(fd, bytes, done, bytes.byteLength - done);
}
