// The transfer profile schema: a well-formed profile parses, a malformed one names its field, and
// the default path is the cross-process path fastest across sizes (copy_engine, in-process only,
// never wins).
import { expect, test } from "bun:test";
import {
  chooseDefaultPath,
  parseTransferProfile,
  profileLatencyPoints,
  TRANSFER_PROFILE_SCHEMA,
  type TransferPairProfile,
  type TransferPathName,
  type TransferProfile,
} from "../../../bench/transfer_profile.ts";

function curve(path: TransferPathName, p95: number[]): TransferPairProfile["paths"][number] {
  return {
    path,
    points: p95.map((ms, i) => ({
      blocks: 2 ** i,
      bytes: 2 ** i * 100,
      p50Ms: ms,
      p95Ms: ms,
      meanMs: ms,
      minMs: ms,
      gbps: 1,
      samples: 5,
      validated: true,
    })),
  };
}

const pair: TransferPairProfile = {
  srcDevice: 0,
  dstDevice: 1,
  paths: [
    curve("raw_copy_engine", [0.05, 0.1, 0.2]),
    curve("nccl", [0.2, 0.3, 0.5]),
    curve("kernel", [0.15, 0.35, 0.6]),
    curve("copy_engine", [0.01, 0.02, 0.03]),
  ],
};

test("a profile parses; a malformed one names the field", () => {
  const p: TransferProfile = {
    schema: TRANSFER_PROFILE_SCHEMA,
    createdAt: "2026-01-01T00:00:00Z",
    backend: "cuda",
    shape: { numLayers: 28, numKvHeads: 8, headDim: 128, blockSize: 256, dtype: "bf16" },
    bytesPerBlock: 29360128,
    defaultPath: "nccl",
    segmentBytes: 0,
    ncclChannels: 0,
    pairs: [pair],
  };
  expect(parseTransferProfile(JSON.parse(JSON.stringify(p)))).toEqual(p);
  expect(() => parseTransferProfile({ ...p, schema: "v0" })).toThrow(/schema must be/);
  expect(() => parseTransferProfile({ ...p, defaultPath: "pcie" })).toThrow(/defaultPath/);
  const unsorted = {
    ...pair,
    paths: [{ ...curve("nccl", [1, 2]), points: [...curve("nccl", [1, 2]).points].reverse() }],
  };
  expect(() => parseTransferProfile({ ...p, pairs: [unsorted] })).toThrow(/pairs\[0\]\.paths\[0\]\.points/);
});

test("the default is the cross-process path fastest across sizes", () => {
  // nccl: ratios 0.2/0.15, 1, 1 ; kernel: 1, 0.35/0.3, 0.6/0.5 -> nccl has the smaller geometric mean.
  expect(chooseDefaultPath([pair])).toBe("nccl");
  const kernelWins = { ...pair, paths: [curve("nccl", [0.3, 0.4, 0.6]), curve("kernel", [0.2, 0.3, 0.5])] };
  expect(chooseDefaultPath([kernelWins])).toBe("kernel");
  expect(chooseDefaultPath([])).toBe("nccl");
});

test("chart points: p95 per size, one series per directed pair and path", () => {
  const p = { pairs: [pair, { ...pair, srcDevice: 1, dstDevice: 0 }] } as TransferProfile;
  const points = profileLatencyPoints(p);
  expect(points).toHaveLength(2 * 4 * 3);
  expect(points.find((x) => x.pair === "1->0 kernel" && x.blocks === 4)).toEqual({
    pair: "1->0 kernel",
    blocks: 4,
    bytes: 400,
    latencyMs: 0.6,
  });
  expect(new Set(points.map((x) => x.pair)).size).toBe(8);
});
