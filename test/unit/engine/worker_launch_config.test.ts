import { describe, expect, test } from "bun:test";
import { deviceShare } from "../../../lib/engine/worker_launch_config.ts";

describe("deviceShare", () => {
  test("a rank alone on its device keeps the engine's own memory fraction", () => {
    expect(deviceShare([0, 1], 0, () => false, { gpuMemoryUtilization: 0.8 })).toEqual({});
  });

  test("ranks sharing a device start with growing fractions that leave each an equal share", () => {
    const gpus = [0, 0, 1];
    expect(deviceShare(gpus, 0, () => false, { gpuMemoryUtilization: 0.8 })).toEqual({ gpuMemoryUtilization: 0.4 });
    // Rank 1 starts once rank 0 runs: it sees rank 0's memory as used, so its fraction covers both.
    expect(deviceShare(gpus, 1, (r) => r === 0, { gpuMemoryUtilization: 0.8 })).toEqual({ gpuMemoryUtilization: 0.8 });
    // A restart of rank 0 beside a running rank 1 sizes the same way.
    expect(deviceShare(gpus, 0, (r) => r === 1, {})).toEqual({ gpuMemoryUtilization: 0.9 });
  });

  test("an explicit block count needs no share", () => {
    expect(deviceShare([0, 0], 1, () => true, { numBlocks: 1600 })).toEqual({});
  });
});
